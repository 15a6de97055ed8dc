"""Before the mount: the password the page's code reads from the environment."""

import os

PASSWORD = "correct horse battery staple"
os.environ["ADMIN_PASSWORD"] = PASSWORD
