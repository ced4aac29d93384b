"""Markdown tables of the configuration keys, embedded in ``docs/reference/configuration.md``.

``python -m consumer._config.doc`` prints them; a unit test checks the docs hold exactly this text
between the ``BEGIN``/``END`` markers, so the docs cannot drift from the parser.
"""

from __future__ import annotations

from consumer._config.spec import CLASSIC_ONLY, KEY_ALIASES, REFUSED, SPECS, KeySpec, Kind

BEGIN_MARKER = "<!-- BEGIN GENERATED KEY TABLES (python -m consumer._config.doc) -->"
END_MARKER = "<!-- END GENERATED KEY TABLES -->"


def _default(spec: KeySpec) -> str:
    if spec.default is None:
        return "unset"
    if isinstance(spec.default, bool):
        return f"`{str(spec.default).lower()}`"
    return f"`{spec.default}`"


def _values(spec: KeySpec) -> str:
    if spec.kind is Kind.INT:
        return f"{spec.min_value} .. {spec.max_value}"
    if spec.kind in (Kind.ENUM, Kind.CSV_FLAGS):
        names = [f"`{c}`" for c in spec.choices]
        names += [f"`{alias}`→`{canonical}`" for alias, canonical in spec.synonyms]
        return ", ".join(names)
    if spec.kind is Kind.BOOL:
        return "`true`, `false`"
    return ""


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_key_tables() -> str:
    """The accepted-key table followed by the refused-key tables, as Markdown."""
    lines = [
        BEGIN_MARKER,
        "",
        "### Accepted keys",
        "",
        "| Key | Type | Default | Range / values | Owner | Note |",
        "|---|---|---|---|---|---|",
    ]
    for spec in SPECS.values():
        lines.append(
            f"| `{spec.name}` | {spec.kind.value} | {_default(spec)} | {_values(spec)} "
            f"| {spec.owner.value} | {_escape(spec.note)} |"
        )
    lines += ["", "### Aliases", "", "| Alias | Same as |", "|---|---|"]
    lines += [f"| `{alias}` | `{name}` |" for alias, name in KEY_ALIASES.items()]
    lines += [
        "",
        "### Classic-protocol keys (refused under `group.protocol=consumer`)",
        "",
        "Given without `group.protocol`, they are checked, then ignored with a warning (a program "
        "written for librdkafka's default, `classic`, still runs; see "
        "`docs/howto/switching-protocol.md`). `ShareConsumer` always refuses them.",
        "",
        "| Key | Replacement under `consumer` |",
        "|---|---|",
    ]
    lines += [f"| `{key}` | {_escape(text)} |" for key, text in CLASSIC_ONLY.items()]
    lines += ["", "### Other refused keys", "", "| Key | Why |", "|---|---|"]
    lines += [f"| `{key}` | {_escape(REFUSED[key])} |" for key in sorted(REFUSED)]
    lines += ["", END_MARKER]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(render_key_tables(), end="")
