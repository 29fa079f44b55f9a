"""JupyterHub settings for a real class on one server (docs/classroom.md, "Running a hub").

Written for The Littlest JupyterHub (TLJH), which runs JupyterHub with a systemd spawner (each
student a Unix user of their own, memory and CPU limits enforced by systemd) and reads extra
settings from /opt/tljh/config/jupyterhub_config.d/. Install it there:

    sudo cp classroom/jupyterhub_config.py /opt/tljh/config/jupyterhub_config.d/normlib.py
    sudo tljh-config reload

TLJH's own `tljh-config set ...` keys do the same for some of these (limits.memory,
limits.cpu, auth.type); set each thing in one place only. Values here are for the collection's
lessons: see docs/classroom.md for the measured memory of one student's server and the sizing.
"""

c = get_config()  # noqa: F821 (JupyterHub's config loader defines get_config)

# ---------------------------------------------------------------- the students' servers

# JupyterLab first.
c.Spawner.default_url = "/lab"
# Memory and CPU per student, enforced by TLJH's systemd spawner (the simple and local process
# spawners ignore them). Each nbgitpuller link opens a notebook with a kernel of its own: measured
# by `make e2e-classroom` (docs/classroom.md, the sizing table), a student with a lesson run and
# two more links open holds about 525 MB, and the lecturer walkthrough measured 976 MB for a lesson
# run, a practice notebook run and a third link. 2 GiB leaves room for one training cell of
# lessons 04, 05 or 07 beside that; the machine's RAM is sized on the typical use, not on this
# limit.
c.Spawner.mem_limit = "2G"
c.Spawner.cpu_limit = 1
# Inside each student's JupyterLab: kernels idle for 20 minutes are shut down, even with their
# tab still open (cull_connected), so the kernels of old links do not add up to the limit above;
# no Jupyter news and no update check.
c.Spawner.args = [
    "--MappingKernelManager.cull_idle_timeout=1200",
    "--MappingKernelManager.cull_interval=60",
    "--MappingKernelManager.cull_connected=True",
    "--LabApp.news_url=",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
]
# The "Would you like to get notified about official Jupyter news?" toast comes from a JupyterLab
# plugin; switch it off for every student once, on the server:
#   sudo /opt/tljh/user/bin/jupyter labextension disable --level=sys_prefix \
#       "@jupyterlab/apputils-extension:announcements"
# (the trial hub does the same with classroom/jupyter_config/labconfig/page_config.json).
#
# Assessed work: a terminal lets a student change a file's time, which `collect --deadline` reads.
# Turn terminals off for the weeks that count:
# c.Spawner.args.append("--ServerApp.terminals_enabled=False")
#
# Stop servers left idle for an hour (TLJH runs jupyterhub-idle-culler; its own setting is
# `tljh-config set services.cull.timeout 3600`). Idle servers hold their memory until then.

# ---------------------------------------------------------------- who may log in (pick one)

# JupyterHub 5+ lets in nobody by default: name the students or allow everyone the
# authenticator accepts.
#
# 1. TLJH's default: the first login of a name sets its password (`tljh-config set auth.type
#    firstuseauthenticator.FirstUseAuthenticator`). Name the class, or anyone can register:
# c.Authenticator.allowed_users = {"student01", "student02"}
#
# 2. One password for the whole class, built into JupyterHub 5+ (a short workshop):
# c.JupyterHub.authenticator_class = "shared-password"
# c.SharedPasswordAuthenticator.user_password = "a long phrase read out in class"
# c.Authenticator.allowed_users = {"student01", "student02"}
#
# 3. The university's accounts: an OAuth login (oauthenticator: GitHub, Google, a generic OpenID
#    Connect provider) or LTI from the course's LMS (ltiauthenticator), each its own package:
# c.JupyterHub.authenticator_class = "generic-oauth"
# c.Authenticator.allow_all = True      # everyone the provider accepts, or allowed_users
#
# 4. Students sign up, an admin approves them (jupyterhub-nativeauthenticator).
#
# Teachers: admins can open any student's server (to help) and start or stop servers.
# c.Authenticator.admin_users = {"lecturer"}
