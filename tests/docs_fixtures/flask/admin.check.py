"""After it: the Flask application serves the admin page under /admin/jobs/, behind its
password, with its links under the mount point, and its own routes as before."""

import base64

client = app.test_client()
assert client.get("/admin/jobs/").status_code == 401
token = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
page = client.get("/admin/jobs/", headers={"Authorization": f"Basic {token}"})
assert page.status_code == 200, page.text
assert "send-confirmation" in page.text
assert 'href="/admin/jobs/static/admin.css"' in page.text
assert client.get("/").status_code == 404  # the application's own routes: none here
