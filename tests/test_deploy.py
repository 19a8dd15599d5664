"""The Kubernetes deployment on paper (docs/kubernetes.md): Zero to JupyterHub values, the single-user image, the
exchange volume. No cluster, no Docker engine and no network here, so these tests hold the files to what can be
checked on this machine, in seconds:

- ``deploy/kubernetes/values.yaml`` against the chart's own values schema (as ``helm`` validates it: the chart's
  defaults merged with ours), and a misspelt copy of it refused by the same schema;
- the Jupyter and nbgrader configuration it mounts is the one ``make hub`` writes (``autograder/maintenance/hub.py``,
  which ``tests/test_hub.py`` runs for real), and the exchange is mounted where that configuration says;
- its hub configuration: only the instructors' group is offered the instructor's profile, each user has a uid;
- ``deploy/image/Dockerfile`` installs the system packages ``scripts/bootstrap.sh`` does (each one in this
  machine's apt lists), pins torch and its index as bootstrap does, names only extras ``pyproject.toml`` has, and
  copies only the student side of the course into the image;
- the links of ``docs/kubernetes.md`` lead somewhere.

The chart's schema and defaults are kept in ``deploy/kubernetes/z2jh-<version>/`` (``values.schema.yaml`` and
``values.yaml`` of the chart's ``jupyterhub/`` folder at the tag ``values.yaml`` names, with the chart's BSD-3
license); ``$PT2E_Z2JH_CHART`` points at another copy, e.g. a newer chart's, to check the values against it.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from traitlets.config import Config

from autograder.maintenance import hub

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "deploy" / "kubernetes" / "values.yaml"
EXCHANGE = ROOT / "deploy" / "kubernetes" / "exchange.yaml"
DOCKERFILE = ROOT / "deploy" / "image" / "Dockerfile"
BOOTSTRAP = ROOT / "scripts" / "bootstrap.sh"
DOC = ROOT / "docs" / "kubernetes.md"
CONFIG_ROOT = "/etc/pt2e"
"""Where values.yaml mounts the folders that ``make hub`` writes under ``hub/etc/``."""
ONLY_IN_BOOTSTRAP = {"chromium": "the course site's browser test (tests/test_site.py), not a class"}


def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text(encoding="utf-8"))


def chart_versions() -> tuple[str, str]:
    """(chart version, JupyterHub version) from values.yaml's ``# chart:`` line."""
    found = re.search(r"^# chart: jupyterhub (\S+), JupyterHub (\S+)$", VALUES.read_text(encoding="utf-8"), re.M)
    assert found, "values.yaml names its chart on a line '# chart: jupyterhub X, JupyterHub Y'"
    return found[1], found[2]


def chart_folder() -> Path:
    """The chart's schema and defaults (see the module's docstring), for the chart version values.yaml names."""
    version = chart_versions()[0]
    folder = Path(os.environ.get("PT2E_Z2JH_CHART") or VALUES.parent / f"z2jh-{version}")
    assert (folder / "values.schema.yaml").is_file() and (folder / "values.yaml").is_file(), (
        f"the chart's values.schema.yaml and values.yaml ({version}) are not in {folder}: docs/kubernetes.md"
    )
    return folder


def coalesce(defaults: Any, overrides: Any) -> Any:
    """Helm's merge of a chart's values with a user's: maps merge key by key, anything else is replaced, and a
    null removes the chart's key."""
    if not (isinstance(defaults, dict) and isinstance(overrides, dict)):
        return copy.deepcopy(overrides)
    merged = copy.deepcopy(defaults)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = coalesce(merged.get(key), value) if key in merged else copy.deepcopy(value)
    return merged


def schema_errors(ours: dict[str, Any]) -> list[str]:
    import jsonschema

    folder = chart_folder()
    schema = yaml.safe_load((folder / "values.schema.yaml").read_text(encoding="utf-8"))
    defaults = yaml.safe_load((folder / "values.yaml").read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(schema)
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(coalesce(defaults, ours))]


def test_values_are_valid_for_the_chart() -> None:
    assert schema_errors(values()) == []


@pytest.mark.parametrize(
    ("path", "wrong"),
    [
        (("singleuser", "storage", "extraVolumeMounts"), "extraVolumeMount"),  # a letter short: silently unused
        (("singleuser", "profileList"), "profilesList"),
        (("cull", "timeout"), "timeOut"),
    ],
)
def test_a_misspelt_key_is_refused(path: tuple[str, ...], wrong: str) -> None:
    broken = values()
    parent = broken
    for key in path[:-1]:
        parent = parent[key]
    parent[wrong] = parent.pop(path[-1])
    errors = schema_errors(broken)
    assert any(repr(wrong) in error for error in errors), errors


def nbgrader_settings(source: str) -> Config:
    """What an nbgrader_config.py sets, read by running it as nbgrader does (``get_config`` in its namespace)."""
    config = Config()
    exec(compile(source, "nbgrader_config.py", "exec"), {"get_config": lambda: config})
    return config


def extra_files() -> dict[str, dict[str, Any]]:
    return {details["mountPath"]: details for details in values()["singleuser"]["extraFiles"].values()}


def test_the_exchange_is_mounted_where_nbgrader_looks_and_shared_by_every_pod() -> None:
    singleuser = values()["singleuser"]
    settings = nbgrader_settings(extra_files()[f"{CONFIG_ROOT}/everyone/nbgrader_config.py"]["stringData"])
    root = settings.Exchange.root
    mounts = {m["mountPath"]: m["name"] for m in singleuser["storage"]["extraVolumeMounts"]}
    assert root in mounts, f"nbgrader's exchange {root} is not one of the volumes mounted: {sorted(mounts)}"
    volume = next(v for v in singleuser["storage"]["extraVolumes"] if v["name"] == mounts[root])
    claim = yaml.safe_load(EXCHANGE.read_text(encoding="utf-8"))
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"], "every user's pod mounts the exchange at once"
    # the exchange's root is made writable for every user (as make hub does: mode 777) in the same volume
    (init,) = [c for c in singleuser["initContainers"] if root in " ".join(c["command"])]
    assert "chmod 0777" in " ".join(init["command"])
    assert {m["name"]: m["mountPath"] for m in init["volumeMounts"]} == {mounts[root]: root}


def test_the_course_id_is_the_courses() -> None:
    settings = nbgrader_settings(extra_files()[f"{CONFIG_ROOT}/everyone/nbgrader_config.py"]["stringData"])
    course_ids = [
        node.value.value
        for node in ast.walk(ast.parse((ROOT / "nbgrader_config.py").read_text(encoding="utf-8")))
        if isinstance(node, ast.Assign)
        and ast.unparse(node.targets[0]) == "c.CourseDirectory.course_id"
        and isinstance(node.value, ast.Constant)
    ]
    assert course_ids == [hub.COURSE_ID] == [settings.CourseDirectory.course_id]


def test_the_jupyter_configuration_is_the_demo_hubs(tmp_path: Path) -> None:
    """Every file ``make hub`` writes for everyone, students and the instructor is mounted at the same place
    under /etc/pt2e with the same content (its own paths moved there), and nothing else is."""
    hub.write_config(tmp_path, 8000, tmp_path / "configurable-http-proxy")
    etc = tmp_path / "etc"
    written = {f"{CONFIG_ROOT}/{p.relative_to(etc)}": p for p in sorted(etc.rglob("*")) if p.is_file()}
    mounted = extra_files()
    assert sorted(mounted) == sorted(written)
    for path, file in written.items():
        text = file.read_text(encoding="utf-8").replace(str(etc), CONFIG_ROOT)
        if path.endswith(".json"):
            assert mounted[path]["data"] == json.loads(text), path
        else:
            ours, hubs = nbgrader_settings(mounted[path]["stringData"]), nbgrader_settings(text)
            for section in (ours, hubs):  # where the course and the exchange live differs by design
                section.get("Exchange", {}).pop("root", None)
                section.get("CourseDirectory", {}).pop("root", None)
            assert ours == hubs, path
    profiles = {p["slug"]: p for p in values()["singleuser"]["profileList"]}
    assert sorted(profiles) == ["instructor", "student"]
    for slug, role in (("student", "students"), ("instructor", "instructor")):
        path = profiles[slug]["kubespawner_override"]["environment"]["JUPYTER_CONFIG_PATH"]
        assert path.split(":") == [f"{CONFIG_ROOT}/{role}", f"{CONFIG_ROOT}/everyone"], "the order make hub uses"


def hub_configuration() -> Config:
    """``c`` after the chart has set the profile list from values.yaml and our hub.extraConfig has run, in the
    chart's order (sorted by name)."""
    settings = values()
    c = Config()
    c.KubeSpawner.profile_list = copy.deepcopy(settings["singleuser"]["profileList"])
    for name, source in sorted(settings["hub"]["extraConfig"].items()):
        exec(compile(source, name, "exec"), {"c": c})
    return c


@pytest.fixture
def hub_users() -> Any:
    """Users and groups of a real JupyterHub database (in memory), as KubeSpawner's ``spawner.user`` holds them."""
    from jupyterhub import orm

    db = orm.new_session_factory("sqlite://")()
    group = orm.Group(name=next(iter(values()["hub"]["config"]["JupyterHub"]["load_groups"])))
    users = {name: orm.User(name=name) for name in ("teacher", "alice", "bob")}
    users["teacher"].groups.append(group)
    db.add_all([group, *users.values()])
    db.commit()
    yield users
    db.close()


def test_only_the_instructors_group_is_offered_the_instructors_profile(hub_users: dict[str, Any]) -> None:
    offer = hub_configuration().KubeSpawner.profile_list
    slugs = {name: [p["slug"] for p in offer(SimpleNamespace(user=user))] for name, user in hub_users.items()}
    assert slugs == {"teacher": ["student", "instructor"], "alice": ["student"], "bob": ["student"]}
    offered = offer(SimpleNamespace(user=hub_users["alice"]))
    offered[0]["kubespawner_override"]["environment"]["JUPYTER_CONFIG_PATH"] = "changed"
    again = offer(SimpleNamespace(user=hub_users["alice"]))
    assert again[0]["kubespawner_override"]["environment"]["JUPYTER_CONFIG_PATH"] != "changed"


def test_each_user_runs_under_a_uid_of_their_own(hub_users: dict[str, Any]) -> None:
    c = hub_configuration()
    uids = {name: c.KubeSpawner.uid(SimpleNamespace(user=user)) for name, user in hub_users.items()}
    assert len(set(uids.values())) == len(uids), uids
    assert all(uid >= 1001 for uid in uids.values()), "none is root or the image's jovyan (1000)"
    assert c.KubeSpawner.uid(SimpleNamespace(user=hub_users["alice"])) == uids["alice"], "the same on every spawn"


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined, comments left out."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip("\\").strip() + " " if line.endswith("\\") else line.strip()
        if not line.endswith("\\"):
            keyword, _, arguments = pending.partition(" ")
            instructions.append((keyword.upper(), arguments.strip()))
            pending = ""
    return instructions


def installed_by_apt(script: str) -> set[str]:
    """The packages of every ``apt-get install`` command in ``script`` (not of messages that mention one)."""
    packages: set[str] = set()
    for line in script.splitlines():
        if "echo" in line:
            continue
        for found in re.finditer(r"apt-get install ([^;&|>]+)", line):
            packages |= {word for word in found[1].split() if re.fullmatch(r"[a-z0-9][a-z0-9.+-]+", word)}
    return packages


def test_the_image_installs_the_system_packages_bootstrap_does() -> None:
    image = set().union(*(installed_by_apt(args) for kind, args in dockerfile() if kind == "RUN"))
    setup = installed_by_apt(BOOTSTRAP.read_text(encoding="utf-8"))
    assert {"graphviz", "fonts-noto-cjk", "bubblewrap"} <= setup, "bootstrap.sh reads as expected"
    assert setup - set(ONLY_IN_BOOTSTRAP) <= image, "bootstrap.sh installs these and the image does not"
    assert shutil.which("apt-cache"), "the tests run on Debian (scripts/bootstrap.sh installs with apt-get)"
    for package in sorted(image):
        shown = subprocess.run(["apt-cache", "show", package], capture_output=True, text=True, check=False)
        assert shown.returncode == 0 and f"Package: {package}" in shown.stdout, f"apt has no package {package}"


def pip_requirements() -> list[Requirement]:
    requirements = []
    for kind, args in dockerfile():
        if kind == "RUN" and "pip install" in args:
            words = shlex.split(args.split("pip install", 1)[1].split("&&", 1)[0])
            requirements += [Requirement(w) for w in words if not w.startswith(("-", "$", "/")) and w[:1].isalpha()]
    return requirements


def test_the_image_pins_torch_and_its_index_as_bootstrap_does() -> None:
    script = BOOTSTRAP.read_text(encoding="utf-8")
    (bootstrap_torch,) = set(re.findall(r'install --index-url "\$TORCH_CPU_INDEX" "(torch==[^"]+)"', script))
    (bootstrap_index,) = re.findall(r'TORCH_CPU_INDEX="\$\{PT2E_TORCH_CPU_INDEX:-([^}]+)\}"', script)
    args = {a.split("=", 1)[0]: a.split("=", 1)[1] for kind, a in dockerfile() if kind == "ARG" and "=" in a}
    assert args["TORCH_CPU_INDEX"] == bootstrap_index
    torch_lines = [a for kind, a in dockerfile() if kind == "RUN" and "torch==" in a and "--index-url" in a]
    assert len(torch_lines) == 1 and '--index-url "${TORCH_CPU_INDEX}"' in torch_lines[0]
    assert [str(r) for r in pip_requirements() if r.name == "torch"] == [bootstrap_torch]


def test_the_image_installs_the_course_with_extras_it_has_and_the_charts_jupyterhub() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    courses = [
        re.search(r"\[([^\]]+)\]", a.split("pip install", 1)[1])
        for kind, a in dockerfile()
        if kind == "RUN" and "pip install" in a and "pt2e-course" in a
    ]
    assert len(courses) == 1 and courses[0], "one pip install of the course with its extras"
    extras = courses[0][1].split(",")
    assert set(extras) <= set(project["optional-dependencies"]), extras
    hub_version = Version(chart_versions()[1])
    (ours,) = [r for r in pip_requirements() if r.name == "jupyterhub"]
    (courses_own,) = [
        Requirement(r) for r in project["optional-dependencies"]["instructor"] if Requirement(r).name == "jupyterhub"
    ]
    assert hub_version in ours.specifier, f"the single-user server's jupyterhub ({ours}) and the chart's hub"
    assert hub_version in courses_own.specifier, "pyproject.toml's instructor extra admits the chart's JupyterHub"
    (base,) = [a for kind, a in dockerfile() if kind == "ARG" and a.startswith("BASE_IMAGE=")]
    python = Version(re.search(r":python-(3\.\d+)", base)[1])
    assert python in SpecifierSet(project["requires-python"]), f"{base} and requires-python"


def test_the_image_holds_only_the_student_side_of_the_course() -> None:
    """No answer key, hidden check or solution is copied in: only what the wheel is built from."""
    packaged = {
        name.split(".")[0]
        for name in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
            "packages"
        ]["find"]["include"]
    }
    copied: set[str] = set()
    for kind, args in dockerfile():
        if kind in ("COPY", "ADD"):
            words = [w for w in shlex.split(args) if not w.startswith("--")]
            copied |= {w.rstrip("/") for w in words[:-1]}
    assert copied, "the Dockerfile copies the course in"
    assert copied <= packaged | {"pyproject.toml", "README.md"}, copied - packaged
    assert all((ROOT / path).exists() for path in copied)


def test_the_kubernetes_doc_links_lead_somewhere() -> None:
    text = DOC.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert {"../deploy/kubernetes/values.yaml", "../deploy/image/Dockerfile", "../SECURITY.md"} <= set(local)
    missing = [t for t in local if not (DOC.parent / t).exists()]
    assert missing == []
