"""Before the mount: the password the page's code reads from the environment."""

import os

from admin_page import PASSWORD

os.environ["ADMIN_PASSWORD"] = PASSWORD
