import torch
from engine.registry import load
from engine.models import ptp as P
from engine.lab.train import token_stream, batches
torch.set_num_threads(1)
lm = load("text-asarm")
held = token_stream("text", "test", lm.codec, 200_000)
gen = torch.Generator().manual_seed(1)
ids = next(batches(held, 256, 4, gen, lm.codec.bos_id))
with torch.no_grad():
    b = P.build_rounds(ids, 5, torch.Generator().manual_seed(2), 0.95, 0.7, 0)
    hid, base, target = P.teacher_rows(lm.model, ids, b)
    v = (b["valid"] & (b["j"] > 0))[:, 1:]
    q = torch.softmax(target[:, :-1], -1); pb = torch.softmax(base[:, :-1], -1)
    x = b["prev"][:, 1:]
    for name, order in (("id", None), ("sorted", torch.sort(pb, dim=-1, descending=True, stable=True).indices)):
        qq, bb, xx = q, pb, x
        if order is not None:
            qq = q.gather(-1, order); bb = pb.gather(-1, order)
            inv = torch.argsort(order, dim=-1); xx = inv.gather(-1, x[..., None])[..., 0]
        hi = qq.cumsum(-1).gather(-1, xx[..., None])[..., 0]; lo = hi - qq.gather(-1, xx[..., None])[..., 0]
        u = (lo + torch.rand(hi.shape) * (hi - lo)).clamp(1e-7, 1 - 1e-7)
        e = P.inverse_cdf_rows(bb, u)
        print(name, "e==x", float((e == xx)[v].float().mean()))
    print("1-TV(base,q)", float((1 - 0.5 * (pb - q).abs().sum(-1))[v].mean()))
