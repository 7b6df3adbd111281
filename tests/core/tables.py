"""Small hand-written knowledge tables for the core's table tests: the verdicts, products and images they name are
worked out by hand in each test, independent of the shipped data (rules/data), which may grow."""

from __future__ import annotations

from typing import Any

from compatcheck.core.knowledge import KnowledgeBase

TABLES: dict[str, list[dict[str, Any]]] = {
    "cuda-toolkits": [
        {"version": "12.4.1", "toolkitDriver": "550.54.15"}, {"version": "12.4.0", "toolkitDriver": "550.54.14"},
        {"version": "12.0.0", "toolkitDriver": "525.60.13"}, {"version": "11.4.0", "toolkitDriver": "470.42.01"},
        {"version": "12.6.0", "toolkitDriver": "560.28.03"},
        {"version": "10.2", "toolkitDriver": "440.33"}],
    "cuda-majors": [{"major": 10, "mvcMinDriver": None}, {"major": 11, "mvcMinDriver": "450.80.02"},
                    {"major": 12, "mvcMinDriver": "525"}],
    # Admin rows come first and shadow the built-in row of the same branch (the second 470 row).
    "driver-branches": [{"branch": 550, "maxCuda": "12.4"}, {"branch": 440, "maxCuda": "10.2"},
                        {"branch": 470, "maxCuda": "11.4"}, {"branch": 470, "maxCuda": "11.9"},
                        {"branch": 525, "maxCuda": "12.0"}],
    "gpu-products": [
        {"match": "^(NVIDIA-)?(Tesla-)?T4$", "product": "Tesla T4", "computeCapability": "7.5", "datacenter": True,
         "mig": False},
        {"match": "^(NVIDIA-)?A100", "product": "A100", "computeCapability": "8.0", "datacenter": True},
        {"match": "RTX", "product": "GeForce RTX", "computeCapability": "8.6"},
        {"match": "A100-SXM", "product": "never: the row above matches first", "computeCapability": "9.0"},
        {"match": "^(NVIDIA-)?H100", "product": "H100", "computeCapability": "9.0", "datacenter": True,
         "mig": True}],
    "architectures": [
        {"computeCapability": "7.5", "architecture": "Turing", "firstCuda": "10.0", "removedIn": None},
        {"computeCapability": "3.5", "architecture": "Kepler", "firstCuda": None, "removedIn": "12.0"},
        {"computeCapability": "7.5", "architecture": "shadowed", "firstCuda": "1.0"},
        {"computeCapability": "9.0", "architecture": "Hopper", "firstCuda": "11.8"},
        {"computeCapability": "8.0", "architecture": "Ampere", "firstCuda": "11.0"}],
    "features": [{"feature": "bf16", "minComputeCapability": "8.0"}, {"feature": "fp8", "minComputeCapability": "8.9"},
                 {"feature": "bf16", "minComputeCapability": "1.0"}],
    "image-profiles": [
        {"name": "cuda", "pattern": r"^nvidia/cuda:(?P<cuda>[^-]+)-", "source": "S"},
        {"name": "triton", "pattern": r"^tritonserver:(?P<version>[^-]+)-py3$", "source": "S", "versions": [
            {"equals": "24.05", "cuda": "12.4.1", "source": "S"},
            {"from": "23.0", "before": "24.0", "cuda": "12.2", "source": "S"},
            {"from": "24.10", "cuda": "12.6", "source": "S"},
            {"before": "22.0", "cuda": "11.4", "source": "S"}]},
        {"name": "fallback", "pattern": r"^nvidia/cuda:(?P<version>.*)", "source": "S", "versions": [
            {"equals": "1", "cuda": "12", "source": "S"}]}],
    "mig-profiles": [{"match": "^A100-SXM4-40GB", "gpu": "A100 40GB", "profiles": ["1g.5gb", "7g.40gb"]},
                     {"match": "^H100", "gpu": "H100", "profiles": ["1g.10gb"]}],
}


def make_kb() -> KnowledgeBase:
    """A new one each time: a KnowledgeBase memoises verdicts and images, and mutmut forks its test runs from a
    process that imported the tests, so a shared one would answer from caches filled before the mutant was on."""
    return KnowledgeBase.from_tables(TABLES)
