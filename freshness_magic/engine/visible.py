"""Program output made safe to show: control characters become their visible pictures.

What tools, cells and models print goes to terminals and notebooks. An escape sequence in it
would set a terminal's title, clear its screen or leave colours on. Shown text keeps its line
breaks and tabs; every other C0 control character and DEL becomes its Unicode control picture
(ESC is shown as U+241B), which says what was there without acting on it, and a C1 control
character (a terminal may take U+009B for ESC [) becomes U+FFFD. Files keep the bytes as written.
"""

from __future__ import annotations

CONTROL_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)} | {0x7F: "\u2421"}
"""Every C0 control character and DEL -> its Unicode control picture."""

_SHOWN = {
    code: picture for code, picture in CONTROL_PICTURES.items() if chr(code) not in "\n\t"
} | dict.fromkeys(range(0x80, 0xA0), "\ufffd")


def visible(text: str) -> str:
    """``text`` with its control characters shown, not acted on (CRLF line ends kept as ``\\n``)."""
    return text.replace("\r\n", "\n").translate(_SHOWN)
