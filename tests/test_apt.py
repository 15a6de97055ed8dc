"""The test processes' apt-get runs take turns (``tests.support.servers.apt``)."""

from __future__ import annotations

import threading
import time

from tests.support.servers.apt import apt_lock


def test_a_second_holder_waits_for_the_first() -> None:
    order: list[str] = []
    first_in = threading.Event()
    release = threading.Event()

    def first() -> None:
        with apt_lock():
            order.append("first in")
            first_in.set()
            release.wait(10)
            order.append("first out")

    def second() -> None:
        first_in.wait(10)
        with apt_lock():
            order.append("second in")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    first_in.wait(10)
    deadline = time.monotonic() + 0.3  # long enough for the second to have got in, were it let
    while time.monotonic() < deadline and "second in" not in order:
        time.sleep(0.01)
    assert order == ["first in"], order
    release.set()
    for thread in threads:
        thread.join(10)
    assert order == ["first in", "first out", "second in"]
