import torch, time
from engine.registry import load
from engine.models import ptp as P
from engine.lab.train import token_stream, batches
torch.set_num_threads(1)
t0=time.time()
lm = load("text-asarm"); V = 4096
train = token_stream("text", "train", lm.codec, 20_000_000)
print(len(train), time.time()-t0)
a, b = train[:-1], train[1:]
c = torch.bincount(a * V + b, minlength=V * V).view(V, V).float()
uni = torch.bincount(train, minlength=V).float() + 1
pmi = torch.log((c + 0.1) / (c.sum(1, keepdim=True) + 0.1 * V)) - torch.log(uni / uni.sum())[None]
torch.save(pmi, "/tmp/ptprun/pmi_text.pt")
U, S, Vh = torch.svd_lowrank(pmi, q=128, niter=3)
low = (U * S) @ Vh.T
print("svd", time.time()-t0, float((low - pmi).pow(2).mean() / pmi.pow(2).mean()))
held = token_stream("text", "test", lm.codec, 200_000)
gen = torch.Generator().manual_seed(1)
ids = next(batches(held, 256, 4, gen, lm.codec.bos_id))
with torch.no_grad():
    bb = P.build_rounds(ids, 5, torch.Generator().manual_seed(2), 0.95, 0.7, 0)
    hid, base, target = P.teacher_rows(lm.model, ids, bb)
    v = bb["valid"] & (bb["j"] > 0)
    q = torch.softmax(target, -1)
    for name, M in (("full", pmi), ("r128", low)):
        for al in (0.0, 0.3, 0.5, 0.8):
            lg = (base + al * M[bb["prev"]]).masked_fill(lm.model.special_mask(), float('-inf'))
            p = torch.softmax(lg, -1)
            print(name, al, float((1 - 0.5 * (p - q).abs().sum(-1))[v].mean()))
