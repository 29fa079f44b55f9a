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
# spawners ignore them). A student's server with a lesson open and its imports run (torch,
# matplotlib, normlib) is measured by `make e2e-classroom`; the training cells of lessons 04, 05 and
# 07 need more while they run. 1 GiB leaves room for that; the hub's RAM is sized on the typical
# use, not on this limit (docs/classroom.md).
c.Spawner.mem_limit = "1G"
c.Spawner.cpu_limit = 1
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
