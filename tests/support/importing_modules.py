"""Two modules written for a test, the second importing the first's job at top level: a
job held by both, which a worker or a test client must declare once."""

from __future__ import annotations

from pathlib import Path


def write_importing_modules(folder: Path, suffix: str = "") -> list[str]:
    """Write ``lab_images{suffix}.py`` (declaring ``resize``) and ``lab_thumbs{suffix}.py``
    (importing it, declaring ``thumb``) into ``folder``; their names, in that order."""
    images, thumbs = f"lab_images{suffix}", f"lab_thumbs{suffix}"
    (folder / f"{images}.py").write_text(
        "import taskq\n\n@taskq.job\ndef resize(path: str) -> str:\n    return path\n"
    )
    (folder / f"{thumbs}.py").write_text(
        f"import taskq\nfrom {images} import resize\n\n"
        "@taskq.job\ndef thumb(path: str) -> str:\n    return resize(path)\n"
    )
    return [images, thumbs]
