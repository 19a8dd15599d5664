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

- ``hub/course/``: the instructor's nbgrader course (``nbgrader_config.py`` and ``source/`` of every module; the
  instructor makes ``release/`` with ``nbgrader generate_assignment``), owned by the instructor, so that
  autograde goes through the course's sandbox as ``pt2e-course grade`` does (as the instructor, not root:
  ``ISOLATION``);
- ``hub/exchange/``: nbgrader's exchange, writable by everyone as nbgrader's documentation asks;
- ``hub/etc/``: the Jupyter configuration each server reads (``JUPYTER_CONFIG_PATH``): the course id and the
  exchange for everyone; for students, nbgrader's instructor tools turned off (the Assignments tab and
  Validate stay);
- the hub's own database, cookie secret and configurable-http-proxy (from npm, installed on first use).

Outside ``hub/``, one file: ``/etc/profile.d/pt2e-course-hub.sh``. JupyterLab's terminal is a login shell
(``bash -l``), and a login shell resets ``PATH`` (Debian's ``/etc/profile``), dropping the venv's ``bin/`` that
the spawner had set; the profile script puts it back for the hub's users only, so ``nbgrader``,
``pt2e-course`` and ``python`` are found in every terminal, and prints ``ISOLATION`` in the instructor's. Each
user's server starts in its root folder (``CourseSpawner``), so the instructor's terminal opens in the course.

    .venv/bin/python -m autograder.maintenance.hub [--port 8000]     # make hub, as root
    .venv/bin/python -m autograder.maintenance.hub --remove          # make hub-clean: the users, hub/, the profile

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

from autograder.course import ROOT, modules, venv_tools_on_path
from autograder.maintenance.workspace import student_config

HUB = ROOT / "hub"
INSTRUCTOR = "pt2e-teacher"
STUDENTS = ("pt2e-alice", "pt2e-bob")
PASSWORD = "pt2e-demo"
"""The students' shared demo password (``SharedPasswordAuthenticator.user_password``: 8 characters or more)."""
COURSE_ID = "pt2e-course"
PROFILE = Path("/etc/profile.d/pt2e-course-hub.sh")
"""The login shells' profile script of the hub's users (``write_profile``), the one file outside ``hub/``."""
FULL_SANDBOX = ".venv/bin/pt2e-course grade M03 --submitted hub/course/submitted --out hub/graded"
"""Grading the hub's collected submissions with the full sandbox: as root, from the repository's folder."""
ISOLATION = (
    "注意：在 hub 上，nbgrader autograde（終端機或 Formgrader）以老師自己、不是 root 的身分執行，沙盒比以 root 評分時弱："
    "每份作業不能換成各自的無權限使用者（學生的程式以老師的 uid 在 user namespace 裡跑），也拿不到記憶體 cgroup"
    "（記憶體上限改成每 0.2 秒加總一次）；要完整的沙盒，請在 collect 之後以 root 在主機上、這個 repository 的資料夾"
    f"（hub/ 的上一層）裡評分：{FULL_SANDBOX}（成績與回饋寫到 hub/graded/，不進 nbgrader 的 gradebook）。"
)
"""What the hub's grading lacks against grading as root, and how to get the full sandbox: one sentence, printed
by ``make hub`` and in the instructor's terminal, and written in the README."""
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
    """The instructor's nbgrader course: the config and every module's source/ (a module already there is kept,
    with the instructor's changes). No release/: the instructor's ``nbgrader generate_assignment`` makes it
    from source/ and registers the assignment in the gradebook (a release/ already there would be skipped)."""
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    for module in modules():
        if not (course / "source" / module).exists():
            shutil.copytree(ROOT / "source" / module, course / "source" / module)
    subprocess.run(["chown", "-R", f"{owner}:{owner}", str(course)], check=True)


def write_profile(profile: Path, users: tuple[str, ...], instructor: str) -> None:
    """The login shells' profile script of the hub's users: the venv's ``bin/`` first on ``PATH`` (a login shell
    starts from ``/etc/profile``'s), and ``ISOLATION`` printed when the instructor opens a terminal in JupyterLab
    (``JUPYTER_SERVER_ROOT`` is set in its terminals only). Other users' shells are left as they are."""
    import shlex

    script = f"""# The PT2E course's demo hub: written by `make hub` (autograder/maintenance/hub.py), removed by `make hub-clean`.
# JupyterLab's terminal is a login shell, which resets PATH: the hub's users get the course's tools back.
case " {" ".join(users)} " in
*" $(id -un) "*)
    PATH={shlex.quote(str(Path(sys.executable).parent))}:"$PATH"
    export PATH
    if [ "$(id -un)" = {shlex.quote(instructor)} ] && [ -n "${{JUPYTER_SERVER_ROOT-}}" ]; then
        case $- in *i*) printf '%s\\n' {shlex.quote(ISOLATION)} ;; esac
    fi
    ;;
esac
"""
    profile.parent.mkdir(parents=True, exist_ok=True)
    profile.write_text(script, encoding="utf-8")
    profile.chmod(0o644)


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

import os

from jupyterhub.spawner import LocalProcessSpawner

settings = SETTINGS


class CourseSpawner(LocalProcessSpawner):
    """LocalProcessSpawner, whose server starts in its root folder instead of the user's home: a terminal opened
    in JupyterLab starts where the server started, so the instructor's opens in the course."""

    def make_preexec_fn(self, name):
        become = super().make_preexec_fn(name)
        root = self.notebook_dir

        def preexec():
            become()
            os.chdir(root)

        return preexec


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
c.JupyterHub.spawner_class = CourseSpawner
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


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise SystemExit(
            f"{what} 要以 root 執行（root 的 shell 裡打同一個指令）：示範用的本機使用者只有 root 能建立與刪除"
        )


def prepare(
    port: int,
    hub: Path = HUB,
    instructor: str = INSTRUCTOR,
    students: tuple[str, ...] = STUDENTS,
    profile: Path = PROFILE,
) -> Path:
    """Users, tools, course, exchange, the login shells' profile script and configuration; returns the hub's
    configuration file."""
    require_root("make hub")
    hub.mkdir(exist_ok=True)
    made = ensure_users((instructor, *students))
    if made:
        print(f"==> 建立了本機使用者：{'、'.join(made)}")
    proxy = ensure_tools(hub)
    make_course(hub / "course", instructor)
    enroll(hub / "course", students, instructor)
    write_profile(profile, (instructor, *students), instructor)
    return write_config(hub, port, proxy, instructor, students)


def processes_of(users: tuple[str, ...]) -> dict[str, str]:
    """The live processes (zombies, which have ended, left out) of these users, by pid, with their command lines."""
    import pwd

    uids = set()
    for name in users:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if proc.stat().st_uid not in uids or (proc / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                continue
            found[proc.name] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
        except OSError:
            continue  # ended meanwhile
    return found


def remove(
    hub: Path = HUB,
    users: tuple[str, ...] = (INSTRUCTOR, *STUDENTS),
    profile: Path = PROFILE,
) -> list[str]:
    """Undo ``make hub`` (``make hub-clean``): its local users with their homes, the profile script and ``hub/``
    (the course, the exchange, the gradebook, the hub's database, the proxy). Refuses while one of the users
    still has a process (the hub is running: stop it first). Returns the users removed."""
    require_root("make hub-clean")
    import pwd

    running = processes_of(users)
    if running:
        raise SystemExit(
            f"hub 的使用者還有 {len(running)} 個行程在跑（{'、'.join(sorted(running, key=int)[:5])}…）："
            "先在 make hub 的終端機按 Ctrl-C 停止 hub，再清除"
        )
    removed = []
    for name in users:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        done = subprocess.run([_sbin("userdel"), "--remove", name], capture_output=True, text=True)
        if done.returncode not in (0, 12):  # 12: the home could not be removed (it is gone already)
            raise SystemExit(f"userdel {name} 失敗：{done.stderr.strip()}")
        removed.append(name)
    profile.unlink(missing_ok=True)
    shutil.rmtree(hub, ignore_errors=True)
    return removed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="PT2E 課程的示範 JupyterHub（一位老師、兩位學生、nbgrader 的 exchange）"
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--prepare-only", action="store_true", help="只準備使用者、課程與設定，不啟動")
    parser.add_argument(
        "--remove", action="store_true", help=f"刪除示範用的使用者（連同家目錄）、{HUB} 與 {PROFILE}（make hub-clean）"
    )
    args = parser.parse_args(argv)
    if args.remove:
        removed = remove()
        print(f"==> 刪除了本機使用者：{'、'.join(removed) or '（沒有）'}；{HUB} 與 {PROFILE} 已刪除（或本來就沒有）")
        return
    config = prepare(args.port)
    print(f"JupyterHub：http://127.0.0.1:{args.port}/")
    print(
        f"老師：{INSTRUCTOR}，密碼 {instructor_password()}（Formgrader、nbgrader 選單；課程在 {HUB / 'course'}；"
        f"密碼存在 {HUB / 'instructor-password'}，只有 root 讀得到）"
    )
    print(f"學生：{'、'.join(STUDENTS)}，共用密碼 {PASSWORD}（只供示範；作業從「作業」選單的 Assignment List 打開）")
    print(
        "老師的指令：在老師的 JupyterLab 開 File > New > Terminal（已經在課程資料夾裡），照 README 的「在 JupyterHub 上」打"
    )
    print(ISOLATION)
    print("停止：Ctrl-C（hub 與每個人的 JupyterLab 一起結束）；刪除示範使用者與 hub/：make hub-clean（以 root）")
    sys.stdout.flush()
    if args.prepare_only:
        return
    jupyterhub = str(Path(sys.executable).parent / "jupyterhub")
    os.chdir(HUB)
    os.execv(jupyterhub, [jupyterhub, "-f", str(config)])


if __name__ == "__main__":
    main()
