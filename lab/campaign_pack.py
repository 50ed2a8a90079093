"""What crosses to and from the lent GPU machine: the compressed travel folder (bundled models and
training tokens, ranked, within 64 MiB with the code tree) and the files that come back (one xz
tar per model, split into parts of at most 16 MiB).

Why here and not in the campaign: packing runs on the CPU before the loan (`campaign pack`), and
unpacking runs on both sides (`campaign unpack` on the GPU machine; `campaign adopt-files` back here).
Standard library and numpy only: nothing of the app or the store.
"""

from __future__ import annotations

import io
import json
import lzma
import shutil
import subprocess
import tarfile
from pathlib import Path

from .campaign_plan import RETURN_FILE_MIB, TRAVEL, TREE_LIMIT_MIB, Travel

MIB = 1 << 20
#: paths the sparse checkout leaves out on the GPU machine (docs/TRAINING.md)
LEFT_BEHIND = ("assets/models/", "docs/img/", "docs/figures/")


def tree_bytes(root: Path, as_is: bool = False) -> int:
    """Bytes of the working tree that travels: tracked files and untracked files git does not ignore.
    By default as the sparse checkout will leave it (LEFT_BEHIND excluded: what `pack` plans for);
    `as_is`: the files on disk now (what `check` measures once the sparse checkout is set)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                           capture_output=True, check=True).stdout
    total = 0
    for n in set(names.decode().split("\0")):
        if n and (as_is or not n.startswith(LEFT_BEHIND)) and (root / n).is_file():
            total += (root / n).stat().st_size
    return total


def folder_bytes(folder: Path) -> int:
    """Bytes of every file under a folder (a carried one)."""
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


def sparse_patterns(root: Path) -> list[str]:
    """The sparse checkout's patterns ([] when it is off)."""
    on = subprocess.run(["git", "config", "--get", "core.sparseCheckout"], cwd=root, capture_output=True, text=True)
    if on.stdout.strip() != "true":
        return []
    out = subprocess.run(["git", "sparse-checkout", "list"], cwd=root, capture_output=True, text=True)
    return out.stdout.split()


def check_travel(root: Path, travel: Path, limit_mib: float = TREE_LIMIT_MIB - 1.0) -> str | None:
    """Why the tree and the travel folder would not go to the GPU machine as they stand, or None:
    the sparse checkout must leave LEFT_BEHIND out, and tree + travel must stay within limit_mib."""
    pats = sparse_patterns(root)
    missing = [d for d in LEFT_BEHIND if f"!/{d}" not in pats]
    if missing:
        return ("the sparse checkout is not set (run: git sparse-checkout set --no-cone '/*' "
                + " ".join(f"'!/{d}'" for d in LEFT_BEHIND) + ")")
    tree, carried = tree_bytes(root, as_is=True), folder_bytes(travel)
    if tree + carried > limit_mib * MIB:
        return (f"tree {tree / MIB:.2f} MiB + travel {carried / MIB:.2f} MiB = {(tree + carried) / MIB:.2f} MiB "
                f"exceeds {limit_mib:.0f} MiB")
    return None


def xz_bytes(data: bytes, preset: int = 6) -> bytes:
    """xz-compress (bf16 weights lose about a quarter, uint16 tokens more)."""
    return lzma.compress(data, preset=preset)


def tar_xz(folder: Path, preset: int = 6) -> bytes:
    """One folder as an xz tar held in memory, its files under the folder's name."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz", preset=preset) as tar:
        for f in sorted(folder.iterdir()):
            if f.is_file() and f.name != "trainer.pt":
                tar.add(f, arcname=f"{folder.name}/{f.name}")
    return buf.getvalue()


def write_parts(data: bytes, out: Path, name: str, part_mib: float = RETURN_FILE_MIB) -> list[Path]:
    """`name` if it fits one file of part_mib, else name.0, name.1, ... each at most part_mib."""
    limit = int(part_mib * MIB)
    out.mkdir(parents=True, exist_ok=True)
    if len(data) <= limit:
        (out / name).write_bytes(data)
        return [out / name]
    paths = []
    for i in range(0, len(data), limit):
        p = out / f"{name}.{i // limit}"
        p.write_bytes(data[i : i + limit])
        paths.append(p)
    return paths


def join_parts(first: Path) -> bytes:
    """The bytes of a file written by write_parts (given the whole name or its .0 part)."""
    if first.is_file() and not first.suffix.lstrip(".").isdigit():
        return first.read_bytes()
    stem = first.with_suffix("") if first.suffix.lstrip(".").isdigit() else first
    parts = sorted(stem.parent.glob(stem.name + ".*"), key=lambda p: int(p.suffix[1:]))
    return b"".join(p.read_bytes() for p in parts if p.suffix[1:].isdigit())


def extract_tar_xz(data: bytes, dest: Path) -> list[str]:
    """Unpack an xz tar into dest (its top folders land there); returns the top folder names."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:xz") as tar:
        tar.extractall(dest, filter="data")
        return sorted({m.name.split("/")[0] for m in tar.getmembers()})


def _token_shards(folder: Path) -> list[Path]:
    """A domain's token arrays, validation first (the trainer's held-out loss), then train in order.
    A shard's document index (<split>-NNN.docs.npy) stays behind: without it the loader reads the
    shard whole, which is what a campaign's training wants."""
    def arrays(pattern: str) -> list[Path]:
        return sorted(p for p in folder.glob(pattern) if not p.name.endswith(".docs.npy"))

    return arrays("valid-*.npy") + arrays("train-*.npy")


def _prefix_that_fits(shard: Path, blob: bytes, room: int) -> bytes | None:
    """The shard's first documents (cut at a document end, from its index) compressed within `room`
    bytes, or None: so a domain whose first train shard is larger than the room left still trains on
    part of it rather than on nothing."""
    import io

    import numpy as np

    index = shard.with_name(shard.name[: -len(".npy")] + ".docs.npy")
    if room <= 0 or not index.is_file():
        return None
    arr = np.load(shard)
    ends = np.load(index)[:, 0]
    guess = int(arr.size * room / len(blob) * 0.9)  # tokens that fit at the whole shard's ratio, less 10%
    for _ in range(4):
        cut = ends[ends <= guess]
        if cut.size == 0:
            return None
        buf = io.BytesIO()
        np.save(buf, arr[: int(cut[-1])])
        small = xz_bytes(buf.getvalue())
        if len(small) <= room:
            return small
        guess = int(guess * 0.8)
    return None


def _blob_tokens(blob: bytes) -> int:
    """How many tokens an xz-compressed .npy holds (what actually travels, a cut prefix included)."""
    import io
    import lzma

    import numpy as np

    return int(np.load(io.BytesIO(lzma.decompress(blob))).size)


def prune_manifest(obj, dropped: set[str]):
    """The token manifest without the entries that name a shard left behind (whatever its layout:
    any list item whose JSON mentions a dropped file name goes)."""
    if isinstance(obj, dict):
        return {k: prune_manifest(v, dropped) for k, v in obj.items()}
    if isinstance(obj, list):
        return [prune_manifest(x, dropped) for x in obj if not any(d in json.dumps(x) for d in dropped)]
    return obj


def pack_tokens(item: Travel, data_dir: Path, out: Path, room: int) -> dict:
    """A domain's tokens: data/tokens/<domain>/ shards (xz) up to the item's cap and the room left;
    else the corpus text (data/corpora/<domain>/*.jsonl, train cut to fit) as today's fallback."""
    cap = min(room, int(item.cap_mib * MIB))
    arrays = data_dir / "tokens" / item.name
    dest = out / "tokens" / item.name
    if (arrays / "manifest.json").is_file():
        # the evaluation texts first, inside the cap (engine eval reads them; they never train)
        used = _carry_eval_text(data_dir / "corpora" / item.name, out / "corpora" / item.name)
        tokens, carried, dropped = {"train": 0, "valid": 0}, [], set()
        for shard in _token_shards(arrays):
            blob = xz_bytes(shard.read_bytes())
            if used + len(blob) > cap:
                first_train = shard.name.startswith("train") and not any(c.startswith("train") for c in carried)
                blob = _prefix_that_fits(shard, blob, cap - used) if first_train else None
                if blob is None:
                    dropped.add(shard.name)
                    continue
            dest.mkdir(parents=True, exist_ok=True)
            (dest / (shard.name + ".xz")).write_bytes(blob)
            used += len(blob)
            carried.append(shard.name)
            tokens["valid" if shard.name.startswith("valid") else "train"] += _blob_tokens(blob)
        if not any(c.startswith("train") for c in carried):
            shutil.rmtree(dest, ignore_errors=True)
            shutil.rmtree(out / "corpora" / item.name, ignore_errors=True)
            return {"what": "tokens", "name": item.name, "bytes": 0, "skipped": "no train shard fits"}
        manifest = prune_manifest(json.loads((arrays / "manifest.json").read_text()), dropped)
        (dest / "manifest.json").write_text(json.dumps(manifest, indent=1))
        return {"what": "tokens", "name": item.name, "bytes": used, "form": "uint16 arrays",
                "shards": carried, "tokens": tokens}
    corpus = data_dir / "corpora" / item.name
    if not (corpus / "train.jsonl").is_file():
        return {"what": "tokens", "name": item.name, "bytes": 0, "skipped": f"no {arrays} nor {corpus}"}
    dest = out / "corpora" / item.name
    dest.mkdir(parents=True, exist_ok=True)
    used = _carry_eval_text(corpus, dest)
    if (corpus / "valid.jsonl").is_file():
        blob = xz_bytes((corpus / "valid.jsonl").read_bytes())
        (dest / "valid.jsonl.xz").write_bytes(blob)
        used += len(blob)
    lines = (corpus / "train.jsonl").read_bytes().splitlines(keepends=True)
    keep = len(lines)
    while keep > 0:
        blob = xz_bytes(b"".join(lines[:keep]))
        if used + len(blob) <= cap:
            break
        keep = int(keep * 0.9 * (cap - used) / max(len(blob), 1)) if cap > used else 0
    if keep <= 0:
        shutil.rmtree(dest, ignore_errors=True)
        return {"what": "tokens", "name": item.name, "bytes": 0, "skipped": "no train text fits"}
    (dest / "train.jsonl.xz").write_bytes(blob)
    chars = sum(len(json.loads(x)["text"]) for x in lines[:keep])
    return {"what": "tokens", "name": item.name, "bytes": used + len(blob), "form": "corpus text (no token arrays)",
            "train_documents": keep, "of_documents": len(lines), "train_chars": chars}


def _carry_eval_text(corpus: Path, dest: Path) -> int:
    """The evaluation texts `engine eval` reads beside the arrays (the test split; HumanEval's
    single-line tasks for code), xz; returns the bytes written."""
    used = 0
    for src in (corpus / "test.jsonl", corpus.parent / "humaneval" / "single_line.jsonl"):
        if src.is_file() and (src.parent == corpus or corpus.name == "code"):
            to = dest.parent / src.parent.name / (src.name + ".xz")
            to.parent.mkdir(parents=True, exist_ok=True)
            blob = xz_bytes(src.read_bytes())
            to.write_bytes(blob)
            used += len(blob)
    return used


def pack_travel(root: Path, models_dir: Path, data_dir: Path, out: Path, plan: tuple[Travel, ...] = TRAVEL,
                limit_mib: float = TREE_LIMIT_MIB, margin_mib: float = 1.0) -> dict:
    """`campaign pack`: the travel folder, each item of the plan in rank order while the tree, what
    is already packed and this item stay under limit_mib (less a margin). Returns its manifest."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    tree = tree_bytes(root)
    room = int((limit_mib - margin_mib) * MIB) - tree
    items = []
    for item in plan:
        if item.what == "model":
            folder = models_dir / item.name
            if not (folder / "config.json").is_file():
                items.append({"what": "model", "name": item.name, "bytes": 0, "skipped": "not here"})
                continue
            blob = tar_xz(folder)
            if len(blob) > room:
                items.append({"what": "model", "name": item.name, "bytes": 0,
                              "skipped": f"{len(blob) / MIB:.1f} MiB > {room / MIB:.1f} MiB left"})
                continue
            (out / "models").mkdir(exist_ok=True)
            (out / "models" / f"{item.name}.tar.xz").write_bytes(blob)
            items.append({"what": "model", "name": item.name, "bytes": len(blob)})
        else:
            items.append(pack_tokens(item, data_dir, out, room))
        room -= items[-1]["bytes"]
    manifest = {"tree_bytes": tree, "limit_mib": limit_mib, "items": items,
                "travel_bytes": sum(i["bytes"] for i in items)}
    (out / "travel.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def unpack_travel(travel: Path, models_dir: Path, data_dir: Path) -> list[str]:
    """`campaign unpack` (on the GPU machine): models into models_dir (a folder already there is
    kept), tokens into data/tokens/<domain>/, corpus text into data/corpora/<domain>/."""
    done = []
    for f in sorted((travel / "models").glob("*.tar.xz")):
        name = f.name[: -len(".tar.xz")]
        if not (models_dir / name / "config.json").is_file():
            extract_tar_xz(f.read_bytes(), models_dir)
            done.append(f"model {name}")
    for kind in ("tokens", "corpora"):
        for d in sorted((travel / kind).glob("*")) if (travel / kind).is_dir() else []:
            dest = data_dir / kind / d.name
            dest.mkdir(parents=True, exist_ok=True)
            for f in d.iterdir():
                if f.suffix == ".xz":
                    (dest / f.name[:-3]).write_bytes(lzma.decompress(f.read_bytes()))
                else:
                    shutil.copy2(f, dest / f.name)
            done.append(f"{kind} {d.name}")
    return done
