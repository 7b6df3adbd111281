"""The YAML/JSON reader: values as Kubernetes reads them, positions, and bad input."""

from __future__ import annotations

from compatcheck.io.manifests import iter_objects, parse_text


def test_positions_of_nested_keys_and_items() -> None:
    text = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n    - name: a\n      image: x\n    - name: b\n"
    (doc,) = parse_text("p.yaml", text).documents
    assert doc.locate("/spec/containers/1/name") == (7, 7)
    assert doc.locate("/spec/containers/0/image") == (6, 7)
    assert doc.locate("/spec/containers/0/resources/limits") == (5, 7)  # missing tail -> nearest existing node


def test_escaped_pointer_tokens() -> None:
    (doc,) = parse_text("p.yaml", "limits:\n  nvidia.com/gpu: 1\n  a~b: 2\n").documents
    assert doc.locate("/limits/nvidia.com~1gpu") == (2, 3)
    assert doc.locate("/limits/a~0b") == (3, 3)


def test_merge_keys_and_anchors() -> None:
    text = "base: &b {image: x, env: [1]}\nc:\n  <<: *b\n  image: z\n"
    (doc,) = parse_text("p.yaml", text).documents
    assert doc.data["c"] == {"image": "z", "env": [1]} and doc.duplicates == []


def test_merge_keys_apply_where_they_stand_as_in_go_yaml_v2() -> None:
    # go-yaml v2 (kubectl): a merge overrides the keys before it; of a list of mappings, the first wins.
    text = "a: &a {x: 1, y0: 1}\nb: &b {x: 2, z: 2}\nc:\n  x: 0\n  <<: [*a, *b]\n"
    (doc,) = parse_text("p.yaml", text).documents
    assert doc.data["c"] == {"x": 1, "y0": 1, "z": 2} and doc.duplicates == []


def test_alias_bomb_is_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    result = parse_text("bomb.yaml", "\n".join(lines) + "\n")
    assert not result.documents and "too many nodes" in result.errors[0].message


def test_documents_before_a_syntax_error_are_kept() -> None:
    result = parse_text("p.yaml", "apiVersion: v1\nkind: Pod\n---\nkind: [\n")
    assert len(result.documents) == 1 and result.errors and result.errors[0].line == 5


def test_json_with_positions() -> None:
    (doc,) = parse_text("p.json", '{\n  "apiVersion": "v1",\n  "kind": "Pod",\n  "spec": {"a": 1}\n}').documents
    assert doc.data["kind"] == "Pod" and doc.locate("/spec/a") == (4, 12)


def test_kind_list_and_non_objects() -> None:
    text = "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod}\n- 3\n- {kind: NoApiVersion}\n"
    (doc,) = parse_text("l.yaml", text).documents
    assert [p for p, _o in iter_objects(doc)] == ["/items/0"]
    (doc,) = parse_text("v.yaml", "replicaCount: 1\n").documents
    assert list(iter_objects(doc)) == []


def test_scalars_resolve_as_kubectl_reads_them() -> None:
    # go-yaml v2 (sigs.k8s.io/yaml): YAML 1.1 booleans in exactly three spellings, a leading 0 is octal, no
    # sexagesimal numbers, timestamps stay strings; keys become JSON strings.
    (doc,) = parse_text("s.yaml", "a: yes\nb: 010\nc: 0o10\nd: '1'\ne: 1.0\nf: ~\ng: 2024-01-01\nh: oN\n"
                                  "i: 1:20\nj: 0b11\nk: 1_000\nl: 08\nm: Off\nn: y\non: 1\n0755: x\n").documents
    assert doc.data == {"a": True, "b": 8, "c": 8, "d": "1", "e": 1.0, "f": None, "g": "2024-01-01", "h": "oN",
                        "i": "1:20", "j": 3, "k": 1000, "l": 8.0, "m": False, "false": True, "true": 1,
                        "493": "x"}
