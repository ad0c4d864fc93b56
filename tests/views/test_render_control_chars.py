"""Labels with control characters lay out through the real ``dot`` into well-formed XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_magic.engine.model import Edge, Graph, Node
from freshness_magic.views.render import build_layout

C0 = "".join(chr(code) for code in range(0x20))


def graph_with(label: str, edge_label: str = "") -> Graph:
    return Graph(
        name="g",
        nodes={
            "start": Node("start", {"shape": "Mdiamond"}),
            "work": Node("work", {"label": label}),
            "done": Node("done", {"shape": "Msquare"}),
        },
        edges=[Edge("start", "work", {"label": edge_label}), Edge("work", "done")],
    )


def texts(svg: str) -> str:
    return "".join(ET.fromstring(svg).itertext())


def test_every_c0_character_in_labels_gives_well_formed_svg() -> None:
    layout = build_layout(graph_with(f"a{C0}b", f"e{C0}f"))
    shown = texts(layout.svg)  # parses: no character XML forbids
    assert "\u2401" in shown and "\u240b" in shown  # \x01 and \x0b shown as their pictures


@settings(max_examples=25, deadline=None)
@given(label=st.text(alphabet=st.sampled_from(list(C0) + list('ab \\"<&')), max_size=12))
def test_any_label_of_control_characters_lays_out(label: str) -> None:
    layout = build_layout(graph_with(label, label))
    ET.fromstring(layout.svg)
