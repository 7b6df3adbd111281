"""KnowledgeBase on small hand-written tables: every lookup and every branch of the driver verdict, with its exact
reasons (``compatcheck versions`` prints them), independent of the shipped data."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core import knowledge
from compatcheck.core.imageconfig import RegistryFacts
from compatcheck.core.images import Binary, ForwardCompat, ImageFacts
from compatcheck.core.knowledge import (
    Architecture,
    DriverVerdict,
    ImageCuda,
    KnowledgeBase,
    KnowledgeError,
    memo,
    normalise_product,
)
from compatcheck.core.versions import parse_compute_capability, parse_cuda_version, parse_driver_version, parse_version
from tests.core.tables import TABLES


def cuda(text: str) -> Any:
    return parse_cuda_version(text)


def drv(text: str) -> Any:
    return parse_driver_version(text)


@pytest.fixture
def kb() -> KnowledgeBase:
    return KnowledgeBase.from_tables(TABLES)  # one per test: see tests/core/tables.make_kb


def test_tables_are_read_sorted_and_first_rows_win(kb: KnowledgeBase) -> None:
    assert kb.toolkits == sorted(kb.toolkits) and kb.toolkits[0] == (cuda("10.2"), drv("440.33"))
    assert kb.branches == [(440, cuda("10.2")), (470, cuda("11.4")), (525, cuda("12.0")), (550, cuda("12.4"))]
    assert kb.mvc == {10: None, 11: drv("450.80.02"), 12: drv("525")}
    assert kb.architectures[parse_compute_capability("7.5")] == Architecture(
        parse_compute_capability("7.5"), "Turing", cuda("10.0"), None)
    kepler = kb.architectures[parse_compute_capability("3.5")]
    assert (kepler.first_cuda, kepler.removed_in) == (None, cuda("12.0"))
    assert kb.features == {"bf16": parse_compute_capability("8.0"), "fp8": parse_compute_capability("8.9")}
    assert [p.datacenter for p in kb.products] == [True, True, False, False, True]
    triton = kb.images[1].versions
    assert triton[0].versions.equals == parse_version("24.05") and triton[3].versions.lo is None
    assert [(i.name, i.source) for i in kb.images] == [("cuda", "S"), ("triton", "S"), ("fallback", "S")]
    assert [(r.versions.lo, r.versions.hi) for r in kb.images[1].versions] == [
        (None, None), (parse_version("23.0"), parse_version("24.0")), (parse_version("24.10"), None),
        (None, parse_version("22.0"))]


@pytest.mark.parametrize(("table", "row", "message"), [
    ("cuda-toolkits", {"version": "12.x", "toolkitDriver": "550"}, "cuda-toolkits: CUDA version '12.x' is not a "
                                                                     "version number"),
    ("cuda-toolkits", {"version": "12.4", "toolkitDriver": "55"}, "cuda-toolkits: driver version '55' is out of "
                                                                    "range"),
    ("cuda-majors", {"major": 12, "mvcMinDriver": "x"}, "cuda-majors: driver version 'x' is not a version number"),
    ("driver-branches", {"branch": 550, "maxCuda": "100.0"}, "driver-branches: CUDA version '100.0' is out of range"),
    ("gpu-products", {"match": "(", "product": "p", "computeCapability": "8.0"}, "gpu-products: bad regex '(': "),
    ("gpu-products", {"match": "x", "product": "p", "computeCapability": "8.0.1"}, "compute capability '8.0.1' is "
                                                                                    "not of the form MAJOR.MINOR"),
    ("architectures", {"computeCapability": "8.0", "architecture": "A", "firstCuda": "x"}, "architectures: CUDA "
                                                                                            "version 'x'"),
    ("architectures", {"computeCapability": "8.0", "architecture": "A", "removedIn": "x"}, "architectures: CUDA "
                                                                                            "version 'x'"),
    ("image-profiles", {"name": "n", "pattern": "[", "source": "s"}, "image-profiles n: bad regex '['"),
    ("image-profiles", {"name": "n", "pattern": "x", "source": "s"}, "image-profiles n: pattern needs a (?P<cuda>) "
                                                                       "or (?P<version>) group, or versions"),
    ("image-profiles", {"name": "n", "pattern": "(?P<version>x)", "source": "s"}, "image-profiles n: (?P<version>) "
                                                                                    "needs a versions table"),
    ("image-profiles", {"name": "n", "pattern": "(?P<version>x)", "source": "s", "versions": [
        {"equals": "1.x", "cuda": "12.4", "source": "s"}]}, "image-profiles n: version '1.x' is not a version number"),
    ("image-profiles", {"name": "n", "pattern": "(?P<version>x)", "source": "s", "versions": [
        {"from": "1", "cuda": "x", "source": "s"}]}, "image-profiles n: CUDA version 'x'"),
    ("image-profiles", {"name": "n", "pattern": "(?P<version>x)", "source": "s", "versions": [
        {"from": "a.b", "cuda": "12", "source": "s"}]}, "image-profiles n: version 'a.b' is not a version number"),
    ("image-profiles", {"name": "n", "pattern": "(?P<version>x)", "source": "s", "versions": [
        {"before": "b", "cuda": "12", "source": "s"}]}, "image-profiles n: version 'b' is not a version number"),
    ("mig-profiles", {"match": "(", "gpu": "g", "profiles": []}, "mig-profiles: bad regex '('"),
])
def test_unusable_rows_are_knowledge_errors(table: str, row: dict[str, Any], message: str) -> None:
    with pytest.raises(KnowledgeError) as err:
        KnowledgeBase.from_tables({table: [row]})
    assert str(err.value).startswith(message)


def test_a_version_pattern_with_a_versions_table_is_accepted() -> None:
    kb = KnowledgeBase.from_tables({"image-profiles": [
        {"name": "n", "pattern": "^i:(?P<version>.+)$", "source": "s",
         "versions": [{"equals": "1", "cuda": "12", "source": "s"}]}]})
    assert kb.image_cuda("i:1") == ImageCuda(cuda("12"), "image i:1")


@pytest.mark.parametrize(("driver", "best", "exact"), [
    ("550.54.15", "12.4", True), ("551", "12.4", False), ("549.1", "12.0", False), ("525", "12.0", True),
    ("470.82.01", "11.4", True), ("439.9", None, False)])
def test_driver_cuda(kb: KnowledgeBase, driver: str, best: str | None, exact: bool) -> None:
    assert kb.driver_cuda(drv(driver)) == (cuda(best) if best else None, exact)


@pytest.mark.parametrize(("runtime", "branch"), [
    ("12.4", 550), ("12.4.1", 550), ("12.1", 550), ("12.0", 525), ("12.0.1", 525), ("11.4", 470), ("11.5", 525),
    ("10.2", 440), ("12.5", None),
    # Older than the first branch's CUDA: a branch before the table's first may be the lowest, so no answer.
    ("10.0", None)])
def test_lowest_branch_for(kb: KnowledgeBase, runtime: str, branch: int | None) -> None:
    assert kb.lowest_branch_for(cuda(runtime)) == branch


@pytest.mark.parametrize(("runtime", "driver"), [
    ("12.4", "550.54.14"), ("12.4.0", "550.54.14"), ("12.4.1", "550.54.15"), ("12.4.7", "550.54.14"),
    ("12", "525.60.13"), ("12.1", None), ("10.2.89", "440.33")])
def test_toolkit_driver(kb: KnowledgeBase, runtime: str, driver: str | None) -> None:
    assert kb.toolkit_driver(cuda(runtime)) == (drv(driver) if driver else None)


def test_mvc_floor(kb: KnowledgeBase) -> None:
    assert (kb.mvc_floor(12), kb.mvc_floor(10), kb.mvc_floor(13)) == (drv("525"), None, None)


NEEDS_550 = "CUDA 12.4 needs a driver from branch >= 550 for full compatibility (toolkit driver 550.54.14)"
MVC_TAIL = "no PTX JIT of newer PTX, no APIs that need a newer driver"


@pytest.mark.parametrize(("runtime", "driver", "driver_cuda", "verdict", "reasons"), [
    ("12.4", "550.54.15", None, "compatible", (NEEDS_550, "the driver supports CUDA 12.4")),
    ("12.2", "550.54.15", None, "compatible", (
        "CUDA 12.2 needs a driver from branch >= 550 for full compatibility", "the driver supports CUDA 12.4")),
    ("12.4", "525.60.13", None, "minor-version-compatibility", (
        NEEDS_550, "the driver supports CUDA 12.0 only",
        f"same major: minor-version compatibility applies (driver >= 525); {MVC_TAIL}")),
    ("12.4", "525", None, "minor-version-compatibility", (
        NEEDS_550, "the driver supports CUDA 12.0 only",
        f"same major: minor-version compatibility applies (driver >= 525); {MVC_TAIL}")),
    ("12.4", None, "12.0", "minor-version-compatibility", (  # no driver: its branch's floor stands for it
        NEEDS_550, "the driver supports CUDA 12.0 only",
        f"same major: minor-version compatibility applies (driver >= 525); {MVC_TAIL}")),
    ("11.4", "450.51.06", "11.0", "incompatible", (
        "CUDA 11.4 needs a driver from branch >= 470 for full compatibility (toolkit driver 470.42.01)",
        "the driver supports CUDA 11.0 only", "below the minor-version-compatibility floor 450.80.02 of CUDA 11.x")),
    ("11.4", None, "11.3", "minor-version-compatibility", (
        "CUDA 11.4 needs a driver from branch >= 470 for full compatibility (toolkit driver 470.42.01)",
        "the driver supports CUDA 11.3 only",
        f"same major: minor-version compatibility applies (driver >= 450.80.02); {MVC_TAIL}")),
    ("10.2", None, "10.1", "incompatible", (
        "CUDA 10.2 needs a driver from branch >= 440 for full compatibility (toolkit driver 440.33)",
        "the driver supports CUDA 10.1 only", "CUDA 10.x has no minor-version compatibility")),
    ("12.0", "470.82.01", None, "incompatible", (
        "CUDA 12.0 needs a driver from branch >= 525 for full compatibility (toolkit driver 525.60.13)",
        "the driver supports CUDA 11.4 only", "minor-version compatibility never crosses a major version")),
    ("11.4", "418.39", None, "incompatible", (
        "CUDA 11.4 needs a driver from branch >= 470 for full compatibility (toolkit driver 470.42.01)",
        "driver 418.39 is older than branch 440 (CUDA 10.2)")),
    ("10.2", "418.39", None, "unknown", (  # older than the table but not newer than its oldest CUDA: not known
        "CUDA 10.2 needs a driver from branch >= 440 for full compatibility (toolkit driver 440.33)",
        "the driver's CUDA version is not known")),
    ("12.4", "549.1", None, "minor-version-compatibility", (  # between two branches: the older one's CUDA
        NEEDS_550, "the driver supports CUDA 12.0 only",
        f"same major: minor-version compatibility applies (driver >= 525); {MVC_TAIL}")),
    ("12.6", "999.1", None, "unknown", (
        "driver branch 999 is newer than every branch in the table (supports at least CUDA 12.4)",)),
    ("12.6", "550.54.15", None, "minor-version-compatibility", (  # no branch gives 12.6: no first reason
        "the driver supports CUDA 12.4 only",
        f"same major: minor-version compatibility applies (driver >= 525); {MVC_TAIL}")),
    ("12.4", None, None, "unknown", (NEEDS_550, "the driver's CUDA version is not known")),
])
def test_verdict(kb: KnowledgeBase, runtime: str, driver: str | None, driver_cuda: str | None, verdict: str,
                 reasons: tuple[str, ...]) -> None:
    rt, d = cuda(runtime), drv(driver) if driver else None
    dc = cuda(driver_cuda) if driver_cuda else (kb.driver_cuda(d)[0] if d else None)
    got = kb.verdict(rt, driver=d, driver_cuda=cuda(driver_cuda) if driver_cuda else None)
    assert got == DriverVerdict(d, dc, rt, verdict, reasons, kb.toolkit_driver(rt), kb.mvc_floor(rt.major)), got.reasons
    assert kb.verdict(rt, driver=d, driver_cuda=cuda(driver_cuda) if driver_cuda else None) is got  # memoised


def test_verdict_without_branches_is_unknown() -> None:
    kb = KnowledgeBase.from_tables({"cuda-majors": [{"major": 12, "mvcMinDriver": "525"}]})
    got = kb.verdict(cuda("12.4"), driver=drv("550.54.15"))
    assert (got.verdict, got.reasons) == ("unknown", ("the driver's CUDA version is not known",))
    got = kb.verdict(cuda("12.4"), driver=drv("550.54.15"), driver_cuda=cuda("12.2"))
    assert (got.verdict, got.reasons[-1]) == (
        "minor-version-compatibility", f"same major: minor-version compatibility applies (driver >= 525); {MVC_TAIL}")
    got = kb.verdict(cuda("12.4"), driver_cuda=cuda("12.2"))  # no branch to stand for the driver
    assert (got.verdict, got.reasons[-1]) == ("incompatible", "below the minor-version-compatibility floor 525 of "
                                                              "CUDA 12.x")


@pytest.mark.parametrize(("label", "product"), [
    ("Tesla-T4", "Tesla T4"), ("NVIDIA-TESLA-T4", "Tesla T4"), ("tesla-t4-SHARED", "Tesla T4"),
    ("Tesla-T4-x", None), ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100"), ("NVIDIA-GeForce-RTX-3090", "GeForce RTX"),
    ("V100", None)])
def test_product(kb: KnowledgeBase, label: str, product: str | None) -> None:
    found = kb.product(label)
    assert (found.product if found else None) == product


def test_product_facts(kb: KnowledgeBase) -> None:
    t4 = kb.product("Tesla-T4")
    assert t4 is not None and (t4.compute_capability, t4.datacenter) == (parse_compute_capability("7.5"), True)


def test_architecture_and_features(kb: KnowledgeBase) -> None:
    turing = kb.architecture(parse_version("7.5.0"))
    assert turing is not None and turing.name == "Turing"
    assert kb.architecture(parse_version("8.6")) is None
    assert kb.feature_min_cc("bf16") == parse_compute_capability("8.0") and kb.feature_min_cc("fp4") is None


@pytest.mark.parametrize(("product", "profiles"), [
    ("A100-SXM4-40GB", {"1g.5gb", "7g.40gb"}), ("A100-SXM4-40GB-MIG-1g.5gb", {"1g.5gb", "7g.40gb"}),
    ("H100-SHARED", {"1g.10gb"}), ("a100-sxm4-40gb", {"1g.5gb", "7g.40gb"}), ("A100-PCIE-40GB", None), (None, None),
    # gpu-products says mig: false -> no profile at all; a product without the field (RTX) stays unknown
    ("Tesla-T4", set()), ("NVIDIA-Tesla-T4-SHARED", set()), ("GeForce-RTX-3090", None)])
def test_mig_profiles_for(kb: KnowledgeBase, product: str | None, profiles: set[str] | None) -> None:
    assert kb.mig_profiles_for(product) == (frozenset(profiles) if profiles is not None else None)


def test_all_mig_profiles(kb: KnowledgeBase) -> None:
    assert kb.all_mig_profiles() == frozenset({"1g.5gb", "7g.40gb", "1g.10gb"})
    assert KnowledgeBase().all_mig_profiles() == frozenset()


@pytest.mark.parametrize(("image", "expected"), [
    ("nvidia/cuda:12.4.1-base", ImageCuda(cuda("12.4.1"), "image nvidia/cuda:12.4.1-base")),
    ("nvidia/cuda:12.x-base", ImageCuda(None, "image nvidia/cuda:12.x-base", "tag CUDA '12.x' unreadable")),
    ("nvidia/cuda:latest", ImageCuda(None, "image nvidia/cuda:latest", "tag version unreadable")),  # fallback row
    ("tritonserver:24.05-py3", ImageCuda(cuda("12.4.1"), "image tritonserver:24.05-py3")),
    ("tritonserver:24.5-py3", ImageCuda(cuda("12.4.1"), "image tritonserver:24.5-py3")),  # = 24.05
    ("tritonserver:24.06-py3", ImageCuda(None, "image tritonserver:24.06-py3",
                                         "version 24.06 of triton is not in the image table")),
    ("tritonserver:23.0-py3", ImageCuda(cuda("12.2"), "image tritonserver:23.0-py3")),
    ("tritonserver:23.12-py3", ImageCuda(cuda("12.2"), "image tritonserver:23.12-py3")),
    ("tritonserver:24.0-py3", ImageCuda(None, "image tritonserver:24.0-py3",
                                        "version 24.0 of triton is not in the image table")),
    ("tritonserver:24.10-py3", ImageCuda(cuda("12.6"), "image tritonserver:24.10-py3")),
    ("tritonserver:30.1-py3", ImageCuda(cuda("12.6"), "image tritonserver:30.1-py3")),
    ("tritonserver:21.9-py3", ImageCuda(cuda("11.4"), "image tritonserver:21.9-py3")),
    ("tritonserver:22.0-py3", ImageCuda(None, "image tritonserver:22.0-py3",
                                        "version 22.0 of triton is not in the image table")),
    ("tritonserver:x-py3", ImageCuda(None, "image tritonserver:x-py3", "tag version unreadable")),
    ("busybox", None),
])
def test_image_cuda(kb: KnowledgeBase, image: str, expected: ImageCuda | None) -> None:
    assert kb.image_cuda(image) == expected
    assert kb.image_cuda(image) == expected  # and from the cache


def test_memo_caches_none_and_stops_growing_at_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def compute(key: str) -> Any:
        calls.append(key)
        return None

    cache: dict[str, Any] = {}
    assert memo(cache, "a", lambda: compute("a")) is None
    assert memo(cache, "a", lambda: compute("a")) is None
    assert calls == ["a"] and cache == {"a": None}
    monkeypatch.setattr(knowledge, "MEMO_LIMIT", 2)
    memo(cache, "b", lambda: compute("b"))
    memo(cache, "c", lambda: compute("c"))
    assert list(cache) == ["a", "b"]  # full: "c" is answered, not kept
    assert memo(cache, "c", lambda: 7) == 7


@pytest.mark.parametrize(("label", "name"), [
    (" Tesla-T4 ", "Tesla-T4"), ("Tesla-T4-SHARED", "Tesla-T4"), ("Tesla-T4-shared", "Tesla-T4"),
    ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "NVIDIA-A100-SXM4-40GB"), ("NVIDIA-H100-MIG-3g.40gb-SHARED", "NVIDIA-H100"),
    ("A100-mig-7g.80gb+me", "A100"), ("SHARED", "SHARED"), ("MIG-1g.5gb", "MIG-1g.5gb")])
def test_normalise_product(label: str, name: str) -> None:
    assert normalise_product(label) == name


# ------------------------------------------------------------------ floating tags (image profiles with `floating`)
FLOATING = {"image-profiles": [
    {"name": "serve", "pattern": r"^serve:v(?P<version>[\d.]+)$", "floating": r"^serve(?::latest)?$", "source": "S",
     "framework": "serve", "versions": [{"from": "1.0", "before": "2.0", "cuda": "12.4", "source": "R1"},
                                        {"from": "2.0", "cuda": "12.1", "source": "R2"},
                                        {"equals": "0.9", "source": "R0", "noCudaRuntime": True}]},
    {"name": "tool", "pattern": r"^tool:v(?P<version>[\d.]+)$", "floating": r"^tool:latest$", "source": "T",
     "framework": "tool",
     "versions": [{"from": "1", "source": "R", "noCudaRuntime": True}]}]}


def test_a_floating_tag_is_decided_from_the_newest_release_and_says_so() -> None:
    facts = KnowledgeBase.from_tables(FLOATING).image_facts("serve:latest")
    note = "a floating tag, assumed from v2.0 and later, the newest serve release compatcheck knows, table undated"
    assert facts == ImageFacts(
        "serve:latest", "serve", cuda=cuda("12.1"), framework="serve", framework_version=parse_version("2.0"),
        origin=f"image serve:latest, {note}", assumed=note)
    assert facts is not None and facts.sources == ("S", "R2")


def test_a_floating_tag_whose_newest_release_carries_no_cuda() -> None:
    facts = KnowledgeBase.from_tables(FLOATING).image_facts("tool:latest")
    note = "a floating tag, assumed from v1 and later, the newest tool release compatcheck knows, table undated"
    assert facts == ImageFacts("tool:latest", "tool", origin=f"image tool:latest, {note}", no_cuda_runtime=True,
                               assumed=note)


def test_a_floating_family_without_any_cuda_row_keeps_the_lowest_bound() -> None:
    kb = KnowledgeBase.from_tables({"image-profiles": [
        {"name": "odd", "pattern": r"^odd:v(?P<version>[\d.]+)$", "floating": r"^odd:latest$", "source": "O",
         "versions": [{"from": "1.0", "before": "2.0", "source": "R"},
                      {"equals": "0.5", "cuda": "11.8", "source": "Q"}]}]})
    facts = kb.image_facts("odd:latest")
    assert facts == ImageFacts("odd:latest", "odd", cuda_at_least=cuda("11.8"),
                               origin="image odd:latest, a floating tag: every odd release in the table carries CUDA "
                                      "11.8 or newer", reason="odd:latest floats over odd releases")


NEWER = {"image-profiles": [
    {"name": "run", "pattern": r"^run:v(?P<version>[\d.]+)(?P<variant>-cu\d+)?$", "floating": r"^run:nightly$",
     "source": "S", "framework": "run", "asOf": "2026-01-01",
     "versionFrom": [{"label": "org.opencontainers.image.version"}, {"env": "RUN_VERSION"}],
     "versions": [{"from": "1.0", "before": "2.0", "cuda": "12.4", "source": "R1"},
                  {"equals": "2.1", "cuda": "12.8", "base": "12.8", "source": "R21"},
                  {"from": "1.0", "before": "1.5", "variant": "-cu130", "cuda": "13.0", "source": "R130"}]}]}
NOTE_21 = "assumed from v2.1, the newest run release compatcheck knows, table dated 2026-01-01"


@pytest.mark.parametrize(("image", "expected", "assumed", "reason"), [
    ("run:v1.5", "12.4", None, ""),  # its own row
    ("run:v2.1", "12.8", None, ""),
    ("run:v2.5", "12.8", NOTE_21, ""),  # newer than every row: the newest row's, said so
    ("run:v10.0", "12.8", NOTE_21, ""),
    ("run:nightly", "12.8", f"a floating tag, {NOTE_21}", ""),
    ("run:v2.0", None, None, "version 2.0 of run is not in the image table"),  # between rows: unknown
    ("run:v0.5", None, None, "version 0.5 of run is not in the image table"),  # older than every row
    # a variant has its own newest row
    ("run:v1.7-cu130", "13.0", "assumed from v1.0 to before v1.5, the newest run release compatcheck knows, table "
                               "dated 2026-01-01", ""),
])
def test_a_version_newer_than_the_table_is_decided_from_the_newest_row(image: str, expected: str | None,
                                                                       assumed: str | None, reason: str) -> None:
    facts = KnowledgeBase.from_tables(NEWER).image_facts(image)
    assert facts is not None
    assert (str(facts.cuda) if facts.cuda else None, facts.assumed, facts.reason) == (expected, assumed, reason)
    assert facts.origin == f"image {image}" + (f", {assumed}" if assumed else "")


def test_an_assumed_tag_keeps_its_own_version_as_the_frameworks() -> None:
    kb = KnowledgeBase.from_tables(NEWER)
    newer, floating = kb.image_facts("run:v2.5"), kb.image_facts("run:nightly")
    assert newer is not None and newer.framework_version == parse_version("2.5")
    assert floating is not None and floating.framework_version == parse_version("2.1")  # the newest row's


def _config(**kw: Any) -> RegistryFacts:
    return RegistryFacts("run:nightly", "sha256:" + "a" * 64, "linux/amd64", **kw)


@pytest.mark.parametrize(("image", "rf", "cuda_", "stated", "assumed"), [
    # the config states the exact version: its own row decides
    ("run:nightly", _config(labels=(("org.opencontainers.image.version", "1.2"),)), "12.4",
     "1.2, from its config's label org.opencontainers.image.version", None),
    ("run:nightly", _config(env=(("RUN_VERSION", "v2.1"),)), "12.8", "2.1, from its config's env RUN_VERSION", None),
    # newer than the table: still assumed, from the exact version
    ("run:v3.0", _config(labels=(("org.opencontainers.image.version", "3.1"),)), "12.8",
     "3.1, from its config's label org.opencontainers.image.version", NOTE_21),
    # an unreadable value is passed over for the next source; none readable: the tag's assumption stands
    ("run:nightly", _config(labels=(("org.opencontainers.image.version", "noble"),), env=(("RUN_VERSION", "1.1"),)),
     "12.4", "1.1, from its config's env RUN_VERSION", None),
    ("run:nightly", _config(labels=(("org.opencontainers.image.title", "1.1"),)), "12.8", None,
     f"a floating tag, {NOTE_21}"),
])
def test_the_version_an_images_config_states(image: str, rf: RegistryFacts, cuda_: str, stated: str | None,
                                             assumed: str | None) -> None:
    kb = KnowledgeBase.from_tables(NEWER)
    facts = kb.with_stated_version(image, kb.image_facts(image), rf)
    assert facts is not None
    assert (str(facts.cuda), facts.stated_version, facts.assumed) == (cuda_, stated, assumed)
    if stated:
        assert facts.origin.startswith(f"image {image} (version {stated})")


def test_a_tag_that_says_its_version_is_not_looked_up_again() -> None:
    kb = KnowledgeBase.from_tables(NEWER)
    own = kb.image_facts("run:v1.5")
    assert kb.with_stated_version("run:v1.5", own, _config(labels=(("org.opencontainers.image.version", "2.1"),))) \
        is own


def test_a_framework_floor_of_a_version_newer_than_its_rows_stays_unknown() -> None:
    # A floor range that ends may mean "not read further" or "the format is gone": never assumed.
    kb = KnowledgeBase.from_tables({"framework-features": [
        {"framework": "run", "feature": "fp8", "from": "1.0", "before": "2.0", "minComputeCapability": "8.9",
         "source": "A"}]})
    assert kb.framework_floor("run", "fp8", parse_version("3.2")) is None
    own = kb.framework_floor("run", "fp8", parse_version("1.5"))
    assert own is not None and own.min_cc == parse_compute_capability("8.9")


def test_a_pinned_tag_of_a_floating_family_is_read_from_its_release() -> None:
    kb = KnowledgeBase.from_tables(FLOATING)
    pinned = kb.image_facts("serve:v1.5")
    assert pinned is not None and (pinned.cuda, pinned.cuda_at_least, pinned.framework_version) == (
        cuda("12.4"), None, parse_version("1.5"))
    assert kb.image_facts("other:latest") is None


# ------------------------------------------------------------------ resolving a reference through a profile
RESOLVE = {
    "forward-compat": [{"cuda": "12.4", "branches": [535], "brands": ["tesla"], "source": "FC124"},
                       {"cuda": "12.4.1", "branches": [550], "brands": ["tesla"], "source": "FC1241"},
                       {"cuda": "11.4.3", "branches": [], "source": "FC114"}],
    "image-profiles": [
        {"name": "os", "pattern": r"^os:", "source": "OS", "noCudaRuntime": True},
        {"name": "base", "pattern": r"^base:(?P<cuda>[^-]+)-x$", "source": "B"},
        {"name": "ngc", "pattern": r"^ngc:(?P<version>[^-]+)-py3$", "source": "N", "framework": "ngc",
         "compatLibs": True, "requireCuda": "9.0",
         "versions": [{"equals": "24.05", "cuda": "12.4.1", "source": "N2405"},
                      {"equals": "24.06", "cuda": "12.5", "source": "N2406",
                       "forwardCompat": {"branches": [470, 525], "brands": ["tesla"], "source": "FWD"}}]},
        {"name": "serve", "pattern": r"^serve:v(?P<version>[\d.]+)(?P<variant>-cu\d+)?$", "source": "S",
         "framework": "serve",
         "versions": [{"from": "1.0", "cuda": "12.8", "base": "12.4.1", "source": "S1",
                       "binaries": [{"component": "kernels", "sass": ["8.0", "9.0"], "ptx": ["9.0"],
                                     "source": "K"}]},
                      {"from": "1.0", "variant": "-cu130", "cuda": "13.0", "base": "13.0", "source": "S130"},
                      {"equals": "0.5", "source": "S05"},
                      {"equals": "0.1", "noCudaRuntime": True, "source": "S01"}]}]}


@pytest.mark.parametrize(("image", "expected", "sources"), [
    ("os:24.04", ImageFacts("os:24.04", "os", origin="image os:24.04", no_cuda_runtime=True), ("OS",)),
    # a tag's CUDA, no release table: no base, no gate, no forward compatibility without a base
    ("base:12.4.1-x", ImageFacts("base:12.4.1-x", "base", cuda=cuda("12.4.1"), origin="image base:12.4.1-x"),
     ("B",)),
    ("base:twelve-x", ImageFacts("base:twelve-x", "base", origin="image base:twelve-x",
                                 reason="tag CUDA 'twelve' unreadable"), ()),
    # NGC: cuda-compat libraries make the release's CUDA the base; its NVIDIA_REQUIRE_CUDA asks for 9.0 only; the
    # forward-compat row of the exact patch release wins over the X.Y row
    ("ngc:24.05-py3", ImageFacts(
        "ngc:24.05-py3", "ngc", cuda=cuda("12.4.1"), origin="image ngc:24.05-py3", framework="ngc",
        framework_version=parse_version("24.05"), base_cuda=cuda("12.4.1"), require_cuda=cuda("9.0"),
        forward_compat=ForwardCompat(cuda("12.4.1"), frozenset({550}), frozenset({"tesla"}), "FC1241")),
     ("N", "N2405")),
    ("ngc:24.06-py3", ImageFacts(
        "ngc:24.06-py3", "ngc", cuda=cuda("12.5"), origin="image ngc:24.06-py3", framework="ngc",
        framework_version=parse_version("24.06"), base_cuda=cuda("12.5"), require_cuda=cuda("9.0"),
        forward_compat=ForwardCompat(cuda("12.5"), frozenset({470, 525}), frozenset({"tesla"}), "FWD")),
     ("N", "N2406")),
    # a month newer than the table: decided from the newest month, and said so
    ("ngc:24.07-py3", ImageFacts(
        "ngc:24.07-py3", "ngc", cuda=cuda("12.5"), framework="ngc", framework_version=parse_version("24.07"),
        origin="image ngc:24.07-py3, assumed from v24.06, the newest ngc release compatcheck knows, table undated",
        base_cuda=cuda("12.5"), require_cuda=cuda("9.0"),
        forward_compat=ForwardCompat(cuda("12.5"), frozenset({470, 525}), frozenset({"tesla"}), "FWD"),
        assumed="assumed from v24.06, the newest ngc release compatcheck knows, table undated"), ("N", "N2406")),
    ("ngc:24.04-py3", ImageFacts("ngc:24.04-py3", "ngc", origin="image ngc:24.04-py3", framework="ngc",
                                 framework_version=parse_version("24.04"),
                                 reason="version 24.04 of ngc is not in the image table"), ()),
    ("ngc:x.y-py3", ImageFacts("ngc:x.y-py3", "ngc", origin="image ngc:x.y-py3", reason="tag version unreadable"),
     ()),
    # wheels over an older base: the origin says so; the base's gate and forward compatibility are the base's
    ("serve:v1.2", ImageFacts(
        "serve:v1.2", "serve", cuda=cuda("12.8"),
        origin="image serve:v1.2, whose wheels load CUDA 12.8 over its CUDA 12.4 base", framework="serve",
        framework_version=parse_version("1.2"), base_cuda=cuda("12.4.1"), require_cuda=cuda("12.4.1"),
        binaries=(Binary("kernels", (parse_compute_capability("8.0"), parse_compute_capability("9.0")),
                         (parse_compute_capability("9.0"),), cuda("12.8"), "K"),),
        forward_compat=ForwardCompat(cuda("12.4.1"), frozenset({550}), frozenset({"tesla"}), "FC1241")),
     ("S", "S1")),
    ("serve:v1.2-cu130", ImageFacts(
        "serve:v1.2-cu130", "serve", cuda=cuda("13.0"), origin="image serve:v1.2-cu130", framework="serve",
        framework_version=parse_version("1.2"), base_cuda=cuda("13.0"), require_cuda=cuda("13.0")),
     ("S", "S130")),
    ("serve:v0.9-cu130", ImageFacts("serve:v0.9-cu130", "serve", origin="image serve:v0.9-cu130", framework="serve",
                                    framework_version=parse_version("0.9"),
                                    reason="version 0.9-cu130 of serve is not in the image table"), ()),
    ("serve:v0.5", ImageFacts("serve:v0.5", "serve", origin="image serve:v0.5", framework="serve",
                              framework_version=parse_version("0.5"),
                              reason="serve does not say which CUDA this tag carries"), ("S", "S05")),
    ("serve:v0.1", ImageFacts("serve:v0.1", "serve", origin="image serve:v0.1", no_cuda_runtime=True), ("S01",)),
])
def test_a_reference_resolves_through_its_profile_and_release(image: str, expected: ImageFacts,
                                                               sources: tuple[str, ...]) -> None:
    facts = KnowledgeBase.from_tables(RESOLVE).image_facts(image)
    assert facts == expected
    assert facts is not None and facts.sources == sources


PROFILE_ROWS = {
    "torch-wheels": [{"from": "2.4", "before": "2.6", "cuda": "12.4", "sass": ["8.0", "7.5"], "ptx": ["9.0"],
                      "source": "TW124"},
                     {"from": "2.4", "cuda": "12.1", "sass": ["7.0"], "source": "TW121"}],
    "image-profiles": [
        # NGC-like but with no start gate at all: requireCuda null, while cuda-compat still makes a base
        {"name": "nogate", "pattern": r"^nogate:(?P<cuda>[\d.]+)$", "source": "G", "compatLibs": True,
         "requireCuda": None},
        {"name": "pt", "pattern": r"^pt:(?P<version>[\d.]+)-cu(?P<flavour>\d+)$", "source": "P", "framework": "torch",
         "versions": [{"from": "2.4", "cuda": "12.4", "source": "P24",
                       "binaries": [{"component": "torch", "torch": "2.5", "source": "PB"}]},
                      {"equals": "2.3", "cuda": "12.4", "source": "P23",
                       "binaries": [{"component": "torch", "torch": "2.5", "torchCuda": "12.1", "source": "PB"},
                                    {"component": "unknown wheel", "torch": "3.0", "source": "PB"},
                                    {"component": "flash", "sass": ["9.0"], "toolkit": "12.3", "optional": True,
                                     "source": "FA"}]}]}]}


def test_no_start_gate_when_the_row_says_requirecuda_null() -> None:
    facts = KnowledgeBase.from_tables(PROFILE_ROWS).image_facts("nogate:12.4.1")
    assert facts is not None and (facts.base_cuda, facts.require_cuda) == (cuda("12.4.1"), None)


def test_wheel_binaries_come_from_the_torch_wheels_table_by_flavour() -> None:
    kb = KnowledgeBase.from_tables(PROFILE_ROWS)
    cc = parse_compute_capability
    pinned = kb.image_facts("pt:2.4-cu124")
    assert pinned is not None and pinned.binaries == (
        Binary("torch 2.5+cu124", (cc("7.5"), cc("8.0")), (cc("9.0"),), cuda("12.4"), "TW124"),)
    # torchCuda picks the wheel flavour over the release's CUDA; a wheel the table lacks gives no binary;
    # explicit architectures keep their own toolkit and optional flag
    old = kb.image_facts("pt:2.3-cu121")
    assert old is not None and old.binaries == (
        Binary("torch 2.5+cu121", (cc("7.0"),), (), cuda("12.1"), "TW121"),
        Binary("flash", (cc("9.0"),), (), cuda("12.3"), "FA", optional=True))


@pytest.mark.parametrize(("row", "message"), [
    ({"name": "n", "pattern": "(?P<cuda>x)", "source": "s", "floating": "("}, "image-profiles n: bad regex '('"),
    ({"name": "n", "pattern": "(?P<cuda>x)", "source": "s", "requireCuda": "x"}, "image-profiles n: CUDA version 'x'"),
    ({"name": "n", "pattern": "(?P<version>x)", "source": "s", "versions": [
        {"equals": "1", "base": "y", "source": "s"}]}, "image-profiles n: CUDA version 'y'"),
    ({"name": "n", "pattern": "(?P<version>x)", "source": "s", "versions": [
        {"equals": "1", "forwardCompat": {"cuda": "z", "branches": [], "source": "s"}, "source": "s"}]},
     "image-profiles n: CUDA version 'z'"),
    ({"name": "n", "pattern": "(?P<version>x)", "source": "s", "versions": [
        {"equals": "1", "frameworkVersion": "v.w", "source": "s"}]}, "image-profiles n: version 'v.w'"),
    ({"name": "n", "pattern": "(?P<cuda>x)", "source": "s", "binaries": [
        {"component": "c", "toolkit": "t", "source": "s"}]}, "image-profiles n: CUDA version 't'"),
])
def test_unusable_profile_fields_are_knowledge_errors(row: dict[str, Any], message: str) -> None:
    with pytest.raises(KnowledgeError) as err:
        KnowledgeBase.from_tables({"image-profiles": [row]})
    assert str(err.value).startswith(message)
