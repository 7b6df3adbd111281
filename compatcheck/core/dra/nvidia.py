"""NVIDIA's DRA driver (``gpu.nvidia.com``) as the rules read a node: per GPU and MIG device it publishes ``type``
(gpu | mig), ``productName``, ``brand``, ``architecture``, ``cudaComputeCapability``, ``driverVersion`` and
``cudaDriverVersion`` (versions), ``profile`` (MIG), and capacity ``memory`` (``cmd/gpu-kubelet-plugin/deviceinfo.go``
and ``mig.go`` in NVIDIA/k8s-dra-driver-gpu). ``device_labels`` maps them onto the GPU Feature Discovery labels that
``cluster.node_facts`` reads, and ``device_resources`` a MIG device onto the device plugin's resource name, so every
rule reads a DRA device as it reads a node: one code path, no rule rewritten.

It must not read objects (``read`` calls it for each device) or evaluate selectors: it maps one ``DeviceInput``.
"""

from __future__ import annotations

from compatcheck.core.cel import DeviceInput, Semver
from compatcheck.core.dra.model import NVIDIA_DRIVER


def _driver_text(v: Semver) -> str:
    """A driver version as NVIDIA writes it: the driver publishes 535.104.05 as the semver 535.104.5."""
    return f"{v.major}.{v.minor}.{v.patch:02d}" if v.patch else f"{v.major}.{v.minor}"


def device_labels(device: DeviceInput) -> tuple[tuple[str, str], ...]:
    """NVIDIA's DRA device attributes as the GPU Feature Discovery labels ``cluster.node_facts`` reads (the
    product label is NVML's name with spaces as dashes, as GFD writes it); () for a device of another driver."""
    if device.driver != NVIDIA_DRIVER:
        return ()
    attrs = device.attributes.get(NVIDIA_DRIVER, {})
    labels: dict[str, str] = {}
    product = attrs.get("productName")
    if isinstance(product, str) and product:
        labels["nvidia.com/gpu.product"] = product.strip().replace(" ", "-")
    cc = attrs.get("cudaComputeCapability")
    if isinstance(cc, Semver):
        labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"] = str(cc.major), str(cc.minor)
    drv = attrs.get("driverVersion")
    if isinstance(drv, Semver):
        labels["nvidia.com/cuda.driver-version.full"] = _driver_text(drv)
    cuda = attrs.get("cudaDriverVersion")
    if isinstance(cuda, Semver):
        labels["nvidia.com/cuda.runtime-version.major"] = str(cuda.major)
        labels["nvidia.com/cuda.runtime-version.minor"] = str(cuda.minor)
    if mig_profile(device) is not None:
        # A MIG device named by its profile is what the device plugin's mixed strategy offers (and GFD labels).
        labels["nvidia.com/mig.strategy"] = "mixed"
    return tuple(sorted(labels.items()))


def mig_profile(device: DeviceInput) -> str | None:
    """The MIG profile of an NVIDIA MIG device (``type`` mig, ``profile`` such as 1g.10gb; MigDeviceInfo.GetDevice
    in cmd/gpu-kubelet-plugin/deviceinfo.go of NVIDIA/k8s-dra-driver-gpu), else None."""
    if device.driver != NVIDIA_DRIVER:
        return None
    attrs = device.attributes.get(NVIDIA_DRIVER, {})
    profile = attrs.get("profile")
    return profile if attrs.get("type") == "mig" and isinstance(profile, str) and profile else None


def resource_profile(profile: str) -> str:
    """A MIG profile as NVML and the DRA driver write it (1g.10gb+me: go-nvlib's MigProfileInfo.String) in the form
    of the device plugin's resource names and the mig-profiles table (1g.10gb.me: '+' becomes '.')."""
    return profile.replace("+", ".")


def device_resources(device: DeviceInput) -> tuple[tuple[str, int], ...]:
    """What a device is as a device-plugin resource, for the rules that read allocatable: an NVIDIA MIG device is one
    ``nvidia.com/mig-<profile>`` (the mixed strategy's name for it); () for any other device."""
    profile = mig_profile(device)
    return ((f"nvidia.com/mig-{resource_profile(profile)}", 1),) if profile is not None else ()
