"""After it: the page was served at /admin/jobs/ (/ redirecting there) until interrupted."""

if visited[0] is not None:
    raise visited[0]
assert interrupted == [signal.SIGINT], interrupted
