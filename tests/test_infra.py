"""infra/: the GCP cluster config is valid for Ray's launcher and its nodes fit marin's resource requests."""

from __future__ import annotations

import os
import re
import tomllib

import yaml

from marin.execution import ResourceConfig
from marin.execution.backends import ray_options
from marin.execution.resources_check import unsatisfiable_reason

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_cluster() -> dict:
    with open(os.path.join(REPO, "infra", "marin-cluster-gcp.yaml")) as f:
        return yaml.safe_load(f)


def as_node(node_type: dict) -> dict:
    return {"Alive": True, "Resources": {k: float(v) for k, v in node_type["resources"].items()}}


def test_gcp_cluster_config_passes_rays_launcher_schema():
    from ray.autoscaler._private.util import validate_config

    validate_config(load_cluster())


def test_cluster_has_cpu_gpu_and_tpu_workers_that_autoscale_preemptibly():
    cfg = load_cluster()
    types = cfg["available_node_types"]
    assert set(types) == {"head", "cpu_worker", "gpu_worker", "tpu_worker"}
    assert cfg["head_node_type"] == "head" and cfg["docker"]["image"]
    for name in ("cpu_worker", "gpu_worker", "tpu_worker"):
        assert types[name]["min_workers"] == 0 < types[name]["max_workers"], name
        node = types[name]["node_config"]
        preemptible = node.get("schedulingConfig", {}).get("preemptible") or any(
            s.get("preemptible") for s in node.get("scheduling", [])
        )
        assert preemptible, f"{name} is not preemptible"


def test_each_worker_type_satisfies_the_resource_config_meant_for_it():
    types = load_cluster()["available_node_types"]
    wants = {
        "cpu_worker": ResourceConfig(cpu=8, custom={"cpu_worker": 1}),
        "gpu_worker": ResourceConfig(cpu=4, gpu=1, accelerator_type="a100"),
        "tpu_worker": ResourceConfig(cpu=8, tpu=4, accelerator_type="tpu-v4"),
    }
    for name, want in wants.items():
        only_that = [as_node(types[name])]
        assert unsatisfiable_reason(ray_options(want), only_that) is None, name
        others = [as_node(t) for n, t in types.items() if n != name]
        assert unsatisfiable_reason(ray_options(want), others) is not None, name


def test_dockerfile_installs_exactly_the_lock_on_the_projects_python():
    with open(os.path.join(REPO, "infra", "Dockerfile")) as f:
        dockerfile = f.read()
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        requires = tomllib.load(f)["project"]["requires-python"]
    (version,) = re.findall(r"^FROM python:(\d+\.\d+)", dockerfile, re.M)
    assert f">={version}" in requires, (version, requires)
    installs = re.findall(r"^RUN .*\buv sync\b.*$", dockerfile, re.M)
    assert installs and all("--frozen" in line for line in installs)
    assert "pip install" not in dockerfile.replace('pip install --no-cache-dir "uv==', "")


def test_accelerator_images_install_jax_backends_pinned_in_the_lock():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    (jax_pin,) = [d for d in project["dependencies"] if d.startswith("jax==")]
    extras = project["optional-dependencies"]
    assert extras["gpu"] == [f"jax[cuda12]=={jax_pin.split('==')[1]}"]
    assert extras["tpu"] == [f"jax[tpu]=={jax_pin.split('==')[1]}"]
    with open(os.path.join(REPO, "uv.lock"), "rb") as f:
        locked = {p["name"] for p in tomllib.load(f)["package"]}
    assert {"jax-cuda12-plugin", "jax-cuda12-pjrt", "nvidia-cudnn-cu12", "libtpu"} <= locked

    with open(os.path.join(REPO, "infra", "Dockerfile")) as f:
        dockerfile = f.read()
    assert 'ARG JAX_EXTRA=""' in dockerfile
    installs = re.findall(r"^RUN .*\buv sync\b.*$", dockerfile, re.M)
    assert all(line.endswith("${JAX_EXTRA:+--extra $JAX_EXTRA}") for line in installs)
    with open(os.path.join(REPO, "infra", "marin-cluster-gcp.yaml")) as f:
        cluster = yaml.safe_load(f)
    types = cluster["available_node_types"]
    assert types["gpu_worker"]["docker"]["worker_image"].endswith("-gpu")
    assert types["tpu_worker"]["docker"]["worker_image"].endswith("-tpu")
