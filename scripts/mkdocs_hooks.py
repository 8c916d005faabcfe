"""mkdocs hooks: pages listed in the nav that are not written yet are left out of it (with a note
in the build log) instead of failing the strict build."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.mirrorlib")


def _prune(items: list[Any], docs: Path) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            ((title, value),) = item.items()
            if isinstance(value, list):
                kept = _prune(value, docs)
                if kept:
                    out.append({title: kept})
            elif isinstance(value, str) and not (docs / value).exists():
                log.info("nav: %s (%s) is not written yet; left out", title, value)
            else:
                out.append(item)
        elif isinstance(item, str) and not (docs / item).exists():
            log.info("nav: %s is not written yet; left out", item)
        else:
            out.append(item)
    return out


def on_config(config: Any) -> Any:
    if config.nav:
        config.nav = _prune(config.nav, Path(config.docs_dir))
    return config
