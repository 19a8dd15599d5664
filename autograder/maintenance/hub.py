"""A JupyterHub for a demo class on this machine (``make hub``): an instructor, two students, nbgrader's exchange.

Who logs in: real local users (``pt2e-teacher``, ``pt2e-alice``, ``pt2e-bob``), made here if missing, because
JupyterHub's default ``LocalProcessSpawner`` starts each user's server *as that user*: the file permissions
of nbgrader's exchange and of each home then hold between students, as on a real server. How they log in:
JupyterHub's ``SharedPasswordAuthenticator`` (made for workshops and demos), limited to those three names: the
students share one demo password, ``pt2e-demo``; the instructor, the hub's admin, has a password of their own
(random, 32 characters, made on the first run and kept in ``hub/instructor-password``, readable by root only),
so a student who knows the demo password cannot log in as the instructor. A demo needs no passwords set on
system accounts (PAM would), and nothing else may log in. A real course replaces it (see the README: an
OAuth or LDAP authenticator, HTTPS, the course id, where the exchange lives).

Everything else lives in ``hub/`` (ignored by git):

- ``hub/course/``: the instructor's nbgrader course (``nbgrader_config.py``, ``source/``, ``release/``), owned
  by the instructor, so that autograde goes through the course's sandbox as ``pt2e-course grade`` does;
- ``hub/exchange/``: nbgrader's exchange, writable by everyone as nbgrader's documentation asks;
- ``hub/etc/``: the Jupyter configuration each server reads (``JUPYTER_CONFIG_PATH``): the course id and the
  exchange for everyone; for students, nbgrader's instructor tools turned off (the Assignments tab and
  Validate stay);
- the hub's own database, cookie secret and configurable-http-proxy (from npm, installed on first use).

    sudo .venv/bin/python -m autograder.maintenance.hub [--port 8000]     # make hub

It needs root (to make users and to start servers as them). Ctrl-C stops the hub and every server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.course import ROOT, venv_tools_on_path
from autograder.maintenance.workspace import student_config

HUB = ROOT / "hub"
INSTRUCTOR = "pt2e-teacher"
STUDENTS = ("pt2e-alice", "pt2e-bob")
PASSWORD = "pt2e-demo"
"""The students' shared demo password (``SharedPasswordAuthenticator.user_password``: 8 characters or more)."""
COURSE_ID = "pt2e-course"
MODULES = ("M03",)
HUB_STUDENT_PLUGINS = ("@jupyter/nbgrader:menu", "@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:course-list")
"""nbgrader's plugins a student on the hub does without: the Assignments tab and Validate stay."""


def _sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def ensure_users(names: tuple[str, ...]) -> list[str]:
    """Make the local users that do not exist yet (with a home); returns the ones made."""
    import pwd

    made = []
    for name in names:
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run([_sbin("useradd"), "--create-home", "--shell", "/bin/bash", name], check=True)
            made.append(name)
        Path(pwd.getpwnam(name).pw_dir).chmod(0o700)  # a student's work is not another student's to read
    return made


def ensure_tools(hub: Path) -> Path:
    """JupyterHub in this venv and configurable-http-proxy in ``hub/`` (npm), installed when missing; returns the
    proxy's command."""
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        print("==> 安裝 JupyterHub（pip）")
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "jupyterhub"], check=True)
    proxy = hub / "node_modules" / ".bin" / "configurable-http-proxy"
    if not proxy.exists():
        if shutil.which("npm") is None:
            raise SystemExit("找不到 npm：JupyterHub 的 configurable-http-proxy 要用 npm 安裝（apt-get install npm）")
        print("==> 安裝 configurable-http-proxy（npm）")
        subprocess.run(["npm", "install", "--silent", "--prefix", str(hub), "configurable-http-proxy"], check=True)
    return proxy


def make_course(course: Path, owner: str) -> None:
    """The instructor's nbgrader course: the config and the modules' source/ and release/ (kept when present)."""
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for module in MODULES:
        for kind in ("source", "release"):
            if not (course / kind / module).exists():
                shutil.copytree(ROOT / kind / module, course / kind / module)
    subprocess.run(["chown", "-R", f"{owner}:{owner}", str(course)], check=True)


def enroll(course: Path, students: tuple[str, ...], owner: str) -> None:
    """The class list in the course's gradebook: the formgrader then names each student (a student nbgrader
    first meets at ``collect`` is listed as "None, None"). Kept when present; the gradebook stays the owner's."""
    from nbgrader.api import Gradebook

    venv_tools_on_path()  # the gradebook's first start runs `alembic`
    database = course / "gradebook.db"
    with Gradebook(f"sqlite:///{database}", course_id=COURSE_ID) as gradebook:
        for student in students:
            name = student.removeprefix("pt2e-")
            gradebook.update_or_create_student(student, first_name=name.capitalize(), last_name="示範")
    shutil.chown(database, owner, owner)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def instructor_password(hub: Path = HUB) -> str:
    """The instructor's own password (the authenticator's admin password: 32 characters or more), made on the
    first run and kept in ``hub/instructor-password``, which only root reads."""
    import secrets

    kept = hub / "instructor-password"
    if not kept.exists():
        fd = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(24) + "\n")  # 32 characters
    return kept.read_text().strip()


def write_config(
    hub: Path, port: int, proxy: Path, instructor_name: str = INSTRUCTOR, students_names: tuple[str, ...] = STUDENTS
) -> Path:
    """``hub/jupyterhub_config.py`` and the Jupyter configuration the users' servers read; returns the former."""
    exchange, course, etc = hub / "exchange", hub / "course", hub / "etc"
    exchange.mkdir(parents=True, exist_ok=True)
    exchange.chmod(0o777)
    everyone = etc / "everyone"
    everyone.mkdir(parents=True, exist_ok=True)
    (everyone / "nbgrader_config.py").write_text(
        "c = get_config()  # noqa: F821\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n",
        encoding="utf-8",
    )
    students = student_config(
        etc / "students",
        plugins=HUB_STUDENT_PLUGINS,
        server_extensions=("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list"),
        assignments_menu=True,
    )
    instructor = etc / "instructor"
    instructor.mkdir(parents=True, exist_ok=True)
    (instructor / "nbgrader_config.py").write_text(
        f"c = get_config()  # noqa: F821\nc.CourseDirectory.root = {str(course)!r}\n", encoding="utf-8"
    )
    for folder in (hub, etc, everyone, students, instructor, students / "labconfig", students / "labsettings"):
        folder.chmod(0o755)
    instructor_password(hub)  # made now, read by the hub's configuration when it starts
    settings = {
        "port": port,
        "hub_port": _free_port(),  # the hub's and the proxy's own ports: free ones, not 8081 and 8001
        "proxy_api_port": _free_port(),
        "proxy": str(proxy),
        "singleuser": str(Path(sys.executable).parent / "jupyterhub-singleuser"),
        "path": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "instructor": instructor_name,
        "students": list(students_names),
        "password": PASSWORD,
        "instructor_password_file": str(hub / "instructor-password"),
        "course": str(course),
        "everyone": str(everyone),
        "students_config": str(students),
        "instructor_config": str(instructor),
        "db": str(hub / "jupyterhub.sqlite"),
        "cookie_secret": str(hub / "jupyterhub_cookie_secret"),
        "pid": str(hub / "jupyterhub-proxy.pid"),
    }
    config = hub / "jupyterhub_config.py"
    config.write_text(CONFIG.replace("SETTINGS", json.dumps(settings, indent=1)), encoding="utf-8")
    return config


CONFIG = '''"""The demo hub of the PT2E course (written by autograder/maintenance/hub.py; edit that, not this)."""

settings = SETTINGS

c = get_config()  # noqa: F821
c.JupyterHub.bind_url = f"http://127.0.0.1:{settings['port']}"
c.JupyterHub.db_url = "sqlite:///" + settings["db"]
c.JupyterHub.cookie_secret_file = settings["cookie_secret"]
c.JupyterHub.hub_port = settings["hub_port"]
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{settings['proxy_api_port']}"
c.ConfigurableHTTPProxy.command = [settings["proxy"]]
c.ConfigurableHTTPProxy.pid_file = settings["pid"]
# a demo: three local users; the students share one password, the instructor (admin) has their own, which
# only root reads; a real course uses a real authenticator (README)
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = settings["password"]
with open(settings["instructor_password_file"], encoding="utf-8") as kept:
    c.SharedPasswordAuthenticator.admin_password = kept.read().strip()
c.Authenticator.allowed_users = {settings["instructor"], *settings["students"]}
c.Authenticator.admin_users = {settings["instructor"]}
# each user's server runs as that user (LocalProcessSpawner), from the course's virtual environment
c.Spawner.cmd = [settings["singleuser"]]
c.Spawner.default_url = "/lab"
c.Spawner.http_timeout = 120


def pre_spawn_hook(spawner):
    import pwd

    name = spawner.user.name
    configs = [settings["everyone"]]
    if name == settings["instructor"]:
        configs.insert(0, settings["instructor_config"])
        spawner.notebook_dir = settings["course"]
    else:
        configs.insert(0, settings["students_config"])
        spawner.notebook_dir = pwd.getpwnam(name).pw_dir
    spawner.environment = {"JUPYTER_CONFIG_PATH": ":".join(configs), "PATH": settings["path"], "LANG": "C.UTF-8"}


c.Spawner.pre_spawn_hook = pre_spawn_hook
'''


def prepare(port: int, hub: Path = HUB, instructor: str = INSTRUCTOR, students: tuple[str, ...] = STUDENTS) -> Path:
    """Users, tools, course, exchange and configuration; returns the hub's configuration file."""
    if os.geteuid() != 0:
        raise SystemExit("make hub 要以 root 執行：它會建立示範用的本機使用者，並以他們的身分啟動各自的 JupyterLab")
    hub.mkdir(exist_ok=True)
    made = ensure_users((instructor, *students))
    if made:
        print(f"==> 建立了本機使用者：{'、'.join(made)}")
    proxy = ensure_tools(hub)
    make_course(hub / "course", instructor)
    enroll(hub / "course", students, instructor)
    return write_config(hub, port, proxy, instructor, students)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="PT2E 課程的示範 JupyterHub（一位老師、兩位學生、nbgrader 的 exchange）"
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--prepare-only", action="store_true", help="只準備使用者、課程與設定，不啟動")
    args = parser.parse_args(argv)
    config = prepare(args.port)
    print(f"JupyterHub：http://127.0.0.1:{args.port}/")
    print(
        f"老師：{INSTRUCTOR}，密碼 {instructor_password()}（Formgrader、nbgrader 選單；課程在 {HUB / 'course'}；"
        f"密碼存在 {HUB / 'instructor-password'}，只有 root 讀得到）"
    )
    print(f"學生：{'、'.join(STUDENTS)}，共用密碼 {PASSWORD}（只供示範；作業從「作業」選單的 Assignment List 打開）")
    print("停止：Ctrl-C（hub 與每個人的 JupyterLab 一起結束）")
    sys.stdout.flush()
    if args.prepare_only:
        return
    jupyterhub = str(Path(sys.executable).parent / "jupyterhub")
    os.chdir(HUB)
    os.execv(jupyterhub, [jupyterhub, "-f", str(config)])


if __name__ == "__main__":
    main()
