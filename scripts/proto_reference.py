#!/usr/bin/env python3
"""The API reference (docs/guide/api.md) generated from proto/quark/v1's comments.

    python3 scripts/proto_reference.py            # rewrite docs/guide/api.md
    python3 scripts/proto_reference.py --check    # exit 1 when docs/guide/api.md is not what the protos give

A comment block right above a service, rpc, message, enum, field or value (no blank line between) documents it, as
does a comment at the end of its line and the comment lines aligned under that one. worker.proto (quarkd's internal
worker protocol) is left out.
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROTOS = ["quark/v1/service.proto", "quark/v1/config.proto", "quark/v1/provenance.proto"]
OUTPUT = os.path.join(ROOT, "docs", "guide", "api.md")

FIELD = re.compile(r"^(optional\s+|repeated\s+)?(map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*(\d+)\s*(\[[^\]]*\])?\s*;")
VALUE = re.compile(r"^(\w+)\s*=\s*(-?\d+)\s*(\[[^\]]*\])?\s*;")
RPC = re.compile(r"^rpc\s+(\w+)\s*\(\s*(stream\s+)?([\w.]+)\s*\)\s*returns\s*\(\s*(stream\s+)?([\w.]+)\s*\)")
BLOCK = re.compile(r"^(service|message|enum|oneof)\s+(\w+)\s*\{")


class Node:
    def __init__(self, kind, name, doc, parent=None):
        self.kind, self.name, self.doc, self.parent = kind, name, doc, parent
        self.items = []  # fields, values or rpcs: dicts
        self.children = []

    @property
    def full_name(self):
        if self.parent is None or self.parent.kind == "file":
            return self.name
        if self.parent.kind == "oneof":
            return self.parent.parent_message().full_name + "." + self.name
        return self.parent.full_name + "." + self.name

    def parent_message(self):
        node = self
        while node.kind == "oneof":
            node = node.parent
        return node


def split_code_comment(line):
    """(code, comment, comment column) of one line; a // inside a string literal is not a comment."""
    in_string = False
    for i, c in enumerate(line):
        if c == '"':
            in_string = not in_string
        elif not in_string and line.startswith("//", i):
            return line[:i].rstrip(), line[i + 2:].strip(), i
    return line.rstrip(), None, -1


def parse(path):
    root = Node("file", os.path.basename(path), "")
    stack = [root]
    pending = []
    last_item, last_column = None, -1
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for raw in lines:
        code, comment, column = split_code_comment(raw)
        stripped = code.strip()
        if not stripped:
            if comment is None:
                pending, last_item = [], None
            elif last_item is not None and column == last_column:
                last_item["doc"] += " " + comment  # continues the trailing comment above
            else:
                pending.append(comment)
                last_item = None
            continue
        doc = " ".join(pending + ([comment] if comment else []))
        pending, last_item = [], None
        top = stack[-1]
        for part in [p for p in re.split(r"(?<=[{};])", stripped) if p.strip()]:
            part = part.strip()
            block = BLOCK.match(part)
            if block:
                node = Node(block.group(1), block.group(2), doc, stack[-1])
                stack[-1].children.append(node)
                stack.append(node)
                continue
            if part == "}":
                stack.pop()
                continue
            top = stack[-1]
            rpc = RPC.match(part)
            field = FIELD.match(part)
            value = VALUE.match(part)
            if top.kind == "service" and rpc:
                item = {"name": rpc.group(1), "request": ("stream " if rpc.group(2) else "") + rpc.group(3),
                        "response": ("stream " if rpc.group(4) else "") + rpc.group(5), "doc": doc}
            elif top.kind in ("message", "oneof") and field:
                label = (field.group(1) or "").strip()
                item = {"name": field.group(3), "number": field.group(4), "doc": doc,
                        "type": (label + " " if label else "") + field.group(2),
                        "oneof": top.name if top.kind == "oneof" else ""}
                top = top.parent_message()
            elif top.kind == "enum" and value:
                item = {"name": value.group(1), "number": value.group(2), "doc": doc}
            else:
                continue  # syntax, package, import, option, reserved
            top.items.append(item)
            last_item, last_column = (item, column) if comment else (None, -1)
    return root


def cell(text):
    return (text or "").replace("|", "\\|").replace("\n", " ")


def type_link(type_name, known):
    bare = type_name.split()[-1]
    if bare.startswith("map<"):
        return f"`{type_name}`"
    if bare in known:
        return type_name.replace(bare, f"[`{bare}`](#{known[bare]})")
    return f"`{type_name}`"


def walk(node):
    for child in node.children:
        if child.kind != "oneof":
            yield child
        yield from walk(child)


def render(roots):
    known = {}
    for root in roots:
        for node in walk(root):
            known[node.full_name] = node.full_name.lower().replace(".", "")
            known.setdefault(node.name, known[node.full_name])
    out = ["# API reference", "",
           "Generated by `scripts/proto_reference.py` from the comments in `proto/quark/v1/` (package `quark.v1`); "
           "do not edit by hand (the ctest `proto_reference_check` fails when it is stale).", ""]
    for root in roots:
        out += [f"## {root.name}", ""]
        for node in walk(root):
            anchor = f'<a id="{known[node.full_name]}"></a>'
            out += [f"### {node.kind} {node.full_name} {anchor}", ""]
            if node.doc:
                out += [node.doc, ""]
            if node.kind == "service":
                out += ["| RPC | Request | Response | Description |", "|---|---|---|---|"]
                for rpc in node.items:
                    out.append(f"| `{rpc['name']}` | {type_link(rpc['request'], known)} | "
                               f"{type_link(rpc['response'], known)} | {cell(rpc['doc'])} |")
            elif node.kind == "message" and node.items:
                out += ["| Field | # | Type | Description |", "|---|---|---|---|"]
                for f in node.items:
                    doc = (f"(oneof `{f['oneof']}`) " if f["oneof"] else "") + f["doc"]
                    out.append(f"| `{f['name']}` | {f['number']} | {type_link(f['type'], known)} | {cell(doc)} |")
            elif node.kind == "enum":
                out += ["| Value | # | Description |", "|---|---|---|"]
                for v in node.items:
                    out.append(f"| `{v['name']}` | {v['number']} | {cell(v['doc'])} |")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the file instead of writing it")
    parser.add_argument("--output", default=OUTPUT)
    args = parser.parse_args()
    text = render([parse(os.path.join(ROOT, "proto", p)) for p in PROTOS])
    if args.check:
        try:
            with open(args.output, encoding="utf-8") as f:
                current = f.read()
        except OSError:
            current = None
        if current != text:
            print(f"{args.output} is stale: run python3 scripts/proto_reference.py", file=sys.stderr)
            return 1
        print(f"{args.output} matches the protos")
        return 0
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
