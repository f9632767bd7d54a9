"""Parser for a Click-like configuration language.

    // comments run to the end of the line; /* block comments */ too
    src :: FromDevice(eth0);
    q :: Queue(100);
    src -> INTTransit(node_id 2) -> q -> ToDevice(eth1);
    lookup[1] -> [0]other;
    a, b :: Counter;

Statements end with ';'. ``name :: Class(args)`` declares; ``x -> y -> z``
connects (port 0 unless ``[n]`` is given after the source or before the target).
An unnamed ``Class(args)`` inside a connection is an anonymous element, named
``Class@N``. Names may be used before their declaration. Every error raised here
is a :class:`ConfigSyntaxError` carrying the line number.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple


class ConfigSyntaxError(ValueError):
    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass
class ElementDecl:
    name: str
    cls: str
    args: List[str]
    line: int
    anonymous: bool = False


@dataclass
class Connection:
    src: str
    src_port: int
    dst: str
    dst_port: int
    line: int


@dataclass
class ConfigAST:
    elements: Dict[str, ElementDecl] = field(default_factory=dict)
    connections: List[Connection] = field(default_factory=list)


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|\#[^\n]*|/\*.*?\*/)
  | (?P<decl>::)
  | (?P<arrow>->)
  | (?P<port>\[\s*\d+\s*\])
  | (?P<semi>;)
  | (?P<comma>,)
  | (?P<lparen>\()
  | (?P<word>[A-Za-z_][A-Za-z0-9_@/.]*)
""", re.VERBOSE | re.DOTALL)


def _tokenize(text: str) -> List[Tuple[str, str, int]]:
    tokens: List[Tuple[str, str, int]] = []
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ConfigSyntaxError(line, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup
        if kind == "lparen":
            # Capture the balanced argument list as one raw token.
            depth, i, quote = 1, m.end(), None
            while i < len(text) and depth:
                ch = text[i]
                if quote:
                    quote = None if ch == quote else quote
                elif ch in "\"'":
                    quote = ch
                elif ch == "(":
                    depth += 1
                elif ch == ")":
                    depth -= 1
                i += 1
            if depth:
                raise ConfigSyntaxError(line, "unclosed '(' in argument list")
            tokens.append(("args", text[m.end():i - 1], line))
            line += text.count("\n", pos, i)
            pos = i
            continue
        if kind not in ("ws", "comment"):
            tokens.append((kind, m.group(), line))
        line += m.group().count("\n")
        pos = m.end()
    return tokens


def split_args(raw: str) -> List[str]:
    """Split an argument string on top-level commas; strip quotes and blanks."""
    out, depth, quote, cur = [], 0, None, []
    for ch in raw:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    args = []
    for a in out:
        a = " ".join(a.split())  # collapse newlines and runs of blanks
        if len(a) >= 2 and a[0] == a[-1] and a[0] in "\"'":
            a = a[1:-1]
        if a:
            args.append(a)
    return args


class _Parser:
    def __init__(self, text: str, known_classes):
        self.toks = _tokenize(text)
        self.i = 0
        self.known = known_classes
        self.ast = ConfigAST()
        self.anon = 0
        self.refs: List[Tuple[str, int]] = []  # (name, line) used in connections

    def peek(self, k=0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "", self.toks[-1][2] if self.toks else 1)

    def take(self, kind=None):
        tok = self.peek()
        if kind and tok[0] != kind:
            raise ConfigSyntaxError(tok[2], f"expected {kind!r}, found {tok[1] or 'end of file'!r}")
        self.i += 1
        return tok

    def parse(self) -> ConfigAST:
        while self.peek()[0] != "eof":
            if self.peek()[0] == "semi":
                self.take()
                continue
            self.statement()
        for name, line in self.refs:
            if name not in self.ast.elements:
                hint = " (a class name needs a declaration or an anonymous use)" if name in self.known else ""
                raise ConfigSyntaxError(line, f"unknown element '{name}'{hint}")
        return self.ast

    def statement(self):
        # Declaration list: a, b :: Class(args);
        j, names = self.i, []
        while self.peek(j - self.i)[0] == "word":
            names.append(self.peek(j - self.i))
            if self.peek(j - self.i + 1)[0] == "comma":
                j += 2
            else:
                break
        if len(names) > 1 and self.peek(j - self.i + 1)[0] == "decl":
            self.i = j + 1
            self.take("decl")
            cls, args, line = self.class_spec()
            for _, name, nline in names:
                self.declare(name, cls, args, nline)
            self.end_statement()
            return
        src = self.endpoint(first=True)
        if self.peek()[0] != "arrow":
            self.end_statement()
            return
        while self.peek()[0] == "arrow":
            arrow_line = self.take()[2]
            dst = self.endpoint(first=False)
            self.ast.connections.append(Connection(src[0], src[2], dst[0], dst[1], arrow_line))
            src = dst
        self.end_statement()

    def end_statement(self):
        tok = self.peek()
        if tok[0] == "eof":
            return
        if tok[0] != "semi":
            raise ConfigSyntaxError(tok[2], f"expected ';' or '->', found {tok[1]!r}")
        self.take()

    def class_spec(self):
        kind, cls, line = self.take("word")
        args: List[str] = []
        if self.peek()[0] == "args":
            args = split_args(self.take()[1])
        if cls not in self.known:
            raise ConfigSyntaxError(line, f"unknown element class '{cls}'")
        return cls, args, line

    def declare(self, name, cls, args, line, anonymous=False):
        if name in self.ast.elements:
            prev = self.ast.elements[name].line
            raise ConfigSyntaxError(line, f"element '{name}' already declared on line {prev}")
        if name in self.known and not anonymous:
            raise ConfigSyntaxError(line, f"element name '{name}' is also a class name")
        self.ast.elements[name] = ElementDecl(name, cls, args, line, anonymous)

    def endpoint(self, first: bool):
        """[in]element[out] -> (name, in_port, out_port)."""
        in_port = 0
        if self.peek()[0] == "port":
            tok = self.take()
            if first:
                raise ConfigSyntaxError(tok[2], "input port given before the first element of a chain")
            in_port = int(tok[1].strip("[] "))
        kind, word, line = self.take("word")
        if self.peek()[0] == "decl":
            self.take()
            cls, args, _ = self.class_spec()
            self.declare(word, cls, args, line)
            name = word
        elif self.peek()[0] == "args" or (word in self.known and word not in self.ast.elements):
            args = split_args(self.take()[1]) if self.peek()[0] == "args" else []
            if word not in self.known:
                raise ConfigSyntaxError(line, f"unknown element class '{word}'")
            self.anon += 1
            name = f"{word}@{self.anon}"
            self.declare(name, word, args, line, anonymous=True)
        else:
            name = word
            self.refs.append((word, line))
        out_port = 0
        if self.peek()[0] == "port":
            out_port = int(self.take()[1].strip("[] "))
        return name, in_port, out_port


def parse_config(text: str, known_classes) -> ConfigAST:
    """Parse configuration text; ``known_classes`` is a set of element class names."""
    return _Parser(text, set(known_classes)).parse()
