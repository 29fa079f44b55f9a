"""A trial hub on your own machine (`make hub`; also `make e2e-classroom`): NOT for a real class.

JupyterHub 6.1 on 127.0.0.1 with its built-in test pieces: the ``dummy`` authenticator (the users
listed below, one shared password) and the ``simple`` spawner, which starts every student's
JupyterLab as YOUR Unix user with its home in the hub's folder. Nothing separates the students but
the hub's own checks (a student cannot open another's server through the hub, but could read their
files from a terminal), so it listens on the loopback only. A real class uses
classroom/jupyterhub_config.py (docs/classroom.md, "Running a hub").

Settings, from the environment (the Makefile sets them):
  NORMLIB_HUB_DIR       the hub's folder: database, cookie secret, logs, students' homes (homes/NAME)
  NORMLIB_HUB_PORT      the port it listens on at 127.0.0.1 (default 8000)
  NORMLIB_HUB_USERS     the test users, comma-separated (default alice,bob,carol)
  NORMLIB_HUB_PASSWORD  their password (default normlib)
  NORMLIB_HUB_LAB_ARGS  extra arguments for each student's JupyterLab, space-separated (tests)
"""

import os
import pathlib
import socket
import sys

c = get_config()  # noqa: F821 (JupyterHub's config loader defines get_config)

HERE = pathlib.Path(__file__).resolve().parent
STATE = pathlib.Path(os.environ.get("NORMLIB_HUB_DIR", HERE.parent / "build" / "hub")).resolve()
PORT = int(os.environ.get("NORMLIB_HUB_PORT", "8000"))
USERS = [u.strip() for u in os.environ.get("NORMLIB_HUB_USERS", "alice,bob,carol").split(",")
         if u.strip()]
STATE.mkdir(parents=True, exist_ok=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Where readers connect, and the two internal ports (the hub's API, the proxy's API) on free ports,
# so that a trial hub and the e2e test's hub can run side by side.
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = PORT
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = _free_port()
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{_free_port()}"
# The proxy from classroom/package-lock.json (npm ci), its PID in the hub's folder.
c.ConfigurableHTTPProxy.command = [str(HERE / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")

# Test users with one shared password (JupyterHub 5+ lets in only the users it is told to).
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = os.environ.get("NORMLIB_HUB_PASSWORD", "normlib")
c.Authenticator.allowed_users = set(USERS)
c.Authenticator.admin_users = set()

# Each student's JupyterLab: this project's venv, home in the hub's folder, JupyterLab first.
c.JupyterHub.spawner_class = "simple"
c.SimpleLocalProcessSpawner.home_dir_template = str(STATE / "homes" / "{username}")
c.Spawner.cmd = [str(pathlib.Path(sys.executable).parent / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
# The students' JupyterLab as in a real class (classroom/jupyterhub_config.py): no news, no update
# check, no "Would you like to get notified about official Jupyter news?" toast (the announcements
# plugin is disabled by classroom/jupyter_config/labconfig/page_config.json), and idle kernels
# culled, so that the kernels of the notebooks a student opened through links do not add up.
c.Spawner.environment = {"JUPYTER_CONFIG_PATH": str(HERE / "jupyter_config")}
args = ["--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--MappingKernelManager.cull_idle_timeout=1200", "--MappingKernelManager.cull_interval=60",
        "--MappingKernelManager.cull_connected=True"]
if os.geteuid() == 0:       # a container or CI as root: Jupyter refuses to start as root otherwise
    args.append("--ServerApp.allow_root=True")
args += os.environ.get("NORMLIB_HUB_LAB_ARGS", "").split()
c.Spawner.args = args
# A loaded laptop (or CI on two cores) can take a while to import JupyterLab the first time.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 180
