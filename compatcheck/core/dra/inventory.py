"""The inventory: the devices a cluster's ResourceSlices publish, the DeviceClasses read beside them, and the taints
DeviceTaintRules put on the devices they select (``build_inventory``), with the ``Allocator`` that decides for pods
over that snapshot (one per inventory: its caches live as long as the snapshot).

It must not fetch anything: the objects come from ``--nodes`` files (io.loader) or the webhook's live view.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from compatcheck.core.dra.allocator import Allocator
from compatcheck.core.dra.model import Device, DeviceClassInfo, DeviceTaint
from compatcheck.core.dra.read import read_device_class, read_slice, read_taint_rule
from compatcheck.core.jsonutil import JsonObject


@dataclass
class Inventory:
    """The devices ResourceSlices publish (and the DeviceClasses read beside them), for one cluster snapshot."""

    devices: list[Device]
    classes: dict[str, DeviceClassInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.allocator = Allocator(self.devices)


def build_inventory(objects: Iterable[JsonObject], source: str = "cluster") -> Inventory:
    """ResourceSlices, DeviceClasses and DeviceTaintRules (any other object is ignored)."""
    devices: list[Device] = []
    classes: dict[str, DeviceClassInfo] = {}
    rules: list[tuple[tuple[str | None, str | None, str | None], DeviceTaint]] = []
    for obj in objects:
        if obj.get("kind") == "ResourceSlice":
            devices.extend(read_slice(obj))
        elif obj.get("kind") == "DeviceClass":
            found = read_device_class(obj, source)
            if found is not None:
                classes[found.name] = found
        elif obj.get("kind") == "DeviceTaintRule":
            rule = read_taint_rule(obj)
            if rule is not None:
                rules.append(rule)
    if rules:
        devices = [replace(d, taints=d.taints + tuple(t for (driver, pool, name), t in rules if (
            driver in (None, d.driver) and pool in (None, d.pool) and name in (None, d.name)))) for d in devices]
    return Inventory(devices, classes)
