"""lab/machine.py: the line every benchmark prints about the machine it ran on."""

from __future__ import annotations

import os

from lab import machine

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse2 avx2 avx512f avx512_vnni amx_tile amx_bf16

processor\t: 1
model name\t: Something Else
flags\t\t: fpu
"""


def test_the_first_processor_names_the_model_and_the_matmul_instruction_sets(monkeypatch, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    monkeypatch.setattr(machine, "Path", lambda _: info)
    assert machine.cpu_model() == "Intel(R) Xeon(R) Processor"
    line = machine.describe()
    assert line == f"{os.cpu_count()} cores Intel(R) Xeon(R) Processor (avx2, avx512f, avx512_vnni, amx_tile)"


def test_without_cpuinfo_the_platform_names_the_machine(monkeypatch, tmp_path):
    monkeypatch.setattr(machine, "Path", lambda _: tmp_path / "missing")
    assert machine.cpu_model() and "(" not in machine.describe()


def test_the_load_average_is_a_number_where_the_os_has_one():
    load = machine.load_average()
    assert load is None or load >= 0
