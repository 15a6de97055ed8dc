"""After it: the application serves the admin page where it was mounted."""

from admin_page import assert_mounted

assert_mounted(app)
