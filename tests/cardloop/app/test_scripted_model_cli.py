"""`python -m cardloop.app.scripted_model`: run on its own, as the README's walkthroughs do."""

from __future__ import annotations

import socket
import subprocess
import sys


def test_a_taken_port_is_one_line_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "cardloop.app.scripted_model", "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"error: cannot listen on 127.0.0.1:{port}" in done.stderr and "Traceback" not in done.stderr
