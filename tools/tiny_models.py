"""Helpers for the app's tests and for trying the page without the bundled models: tiny random
AS-ARM checkpoints (character vocabularies, so every input character is representable) and a way
to launch the app on a free local port in this process."""

from __future__ import annotations

import socket
import string
from pathlib import Path

from engine.inputs.domains import PROTEIN_ALPHABET

TINY = {
    "text-asarm": ("text", string.printable),
    "protein-asarm": ("protein", PROTEIN_ALPHABET),
}


def make_tiny_models(root: Path, names: tuple[str, ...] = ("text-asarm", "protein-asarm"), seed: int = 0,
                     spread: float = 0.35) -> Path:
    """Random two-stream models (2 layers, width 32, 128 positions) saved as <root>/<name>/.
    `spread` scales the random weights so conditionals differ and drafts really get rejected."""
    import torch

    from engine.inputs.tokenization import Codec, char_tokenizer
    from engine.models.asarm import AsArmConfig, AsArmModel

    root = Path(root)
    for name in names:
        domain, alphabet = TINY[name]
        torch.manual_seed(seed)
        codec = Codec(char_tokenizer(alphabet))
        cfg = AsArmConfig(vocab_size=codec.vocab_size, hidden_size=32, num_layers=2, num_heads=2,
                          intermediate_size=64, max_positions=129, domain=domain, bos_token_id=codec.bos_id,
                          pad_token_id=codec.pad_id, mask_token_id=codec.mask_id,
                          special_token_ids=codec.special_ids)
        model = AsArmModel(cfg)
        with torch.no_grad():
            for prm in model.parameters():
                if prm.dim() > 1:
                    prm.normal_(0, spread)
        folder = root / name
        model.save_pretrained(folder)
        codec.hf.save_pretrained(folder)
    return root


def free_port() -> int:
    """A local TCP port free right now (for launching a test server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_for_tests(port: int | None = None):
    """Launch the app without blocking; returns (demo, url). Call demo.close() when done. Like every
    launched server it starts with its own per-address call counts (app.serving.limits.launch_limits)."""
    from app import create
    from app.serving.limits import launch_limits
    from app.ui import launch_kwargs

    port = port or free_port()
    demo = create()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                **launch_kwargs(), **launch_limits())
    return demo, f"http://127.0.0.1:{port}/"
