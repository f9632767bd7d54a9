import pytest

from int_node.config import ConfigSyntaxError, parse_config, split_args
from int_node.element import REGISTRY
from int_node.router import Router

KNOWN = set(REGISTRY)


def test_declarations_connections_and_anonymous_elements():
    ast = parse_config("""
        // comment
        src :: Idle;
        src -> c :: Counter -> q :: Queue(capacity 10) -> Unqueue -> Discard;   /* block */
    """, KNOWN)
    assert ast.elements["q"].args == ["capacity 10"]
    assert ast.elements["q"].line == 4
    anon = [e for e in ast.elements.values() if e.anonymous]
    assert sorted(e.cls for e in anon) == ["Discard", "Unqueue"]
    assert [(c.src, c.dst) for c in ast.connections][:2] == [("src", "c"), ("c", "q")]


def test_ports_and_forward_references():
    ast = parse_config("cl[1] -> [0]d; cl :: Classifier(ipv6, -); Idle -> cl -> Discard; d :: Discard;", KNOWN)
    c = ast.connections[0]
    assert (c.src, c.src_port, c.dst, c.dst_port) == ("cl", 1, "d", 0)


def test_split_args_keeps_nested_commas_and_strips_quotes():
    assert split_args(' a 1, "b, c" , f(x, y) ,') == ["a 1", "b, c", "f(x, y)"]


@pytest.mark.parametrize("text, line, words", [
    ("a :: Nope;", 1, "unknown element class 'Nope'"),
    ("\n\nIdle -> x;", 3, "unknown element 'x'"),
    ("a :: Idle;\na :: Idle;", 2, "already declared on line 1"),
    ("Idle -> Queue(5", 1, "unclosed"),
    ("Idle -> Discard $", 1, "unexpected character"),
])
def test_syntax_errors_name_the_line(text, line, words):
    with pytest.raises(ConfigSyntaxError) as exc:
        parse_config(text, KNOWN)
    assert exc.value.line == line and words in str(exc.value)


@pytest.mark.parametrize("text, words", [
    ("Idle -> q :: Queue(zero) -> Unqueue -> Discard;", "bad value 'zero' for 'capacity'"),
    ("Idle -> Queue(1, 2, 3) -> Unqueue -> Discard;", "unexpected argument '3'"),
    ("Idle -> RandomLoss(150%) -> Discard;", "between 0 and 1"),
    ("Idle -> LinkShaper(10Mbps) -> Discard;", "push output of 'Idle@1' connected to pull input"),
    ("Idle -> Queue -> Discard;", "pull output of 'Queue@2' connected to push input"),
    ("Idle -> c :: Classifier(ipv6, -) -> Discard;", "output port 1 is not connected"),
    ("Idle -> Counter;", "output port 0 is not connected"),
    ("i :: Idle; i -> Discard; i[0] -> Discard;", "connected twice"),
    ("Idle -> EtherRewrite(src 02:00:00:00:00:01) -> Discard;", "missing required argument 'dst'"),
])
def test_graph_and_argument_errors(text, words):
    with pytest.raises(ConfigSyntaxError) as exc:
        Router(text)
    assert words in str(exc.value)
    assert str(exc.value).startswith("line 1:")


def test_agnostic_elements_take_the_kind_of_their_neighbours():
    r = Router("Idle -> q :: Queue(5) -> c :: Counter -> s :: LinkShaper(1Mbps) -> Discard;")
    assert r.elements["c"].resolved_in_kind == "pull"
    r = Router("Idle -> c :: Counter -> Discard;")
    assert r.elements["c"].resolved_in_kind == "push"
