"""Logs whose noise is not tests/research_log.py's: one error repeated thousands of times (a
Java service's read timeouts with their stack traces, a pod's readiness-probe failures)
around two rare root causes. Chunk selection must not be tuned to one generator's templates.
Deterministic for a seed."""

from __future__ import annotations

import random
from collections.abc import Callable

JAVA_CAUSES = (
    'Caused by: org.postgresql.util.PSQLException: FATAL: password authentication failed for user "orders"',
    'Exception in thread "settlement-scheduler-1" java.lang.OutOfMemoryError: Java heap space',
)

POD_CAUSES = (
    'Error: secret "payments-db-credentials" not found',
    "panic: runtime error: invalid memory address or nil pointer dereference",
)


def _java_noise(rng: random.Random, stamp: str) -> list[str]:
    if rng.random() < 0.45:  # the repeated error: every few lines a timeout with its trace
        thread = rng.randint(1, 200)
        return [f"{stamp} ERROR 1 --- [http-nio-8080-exec-{thread}] o.a.c.c.C.[dispatcherServlet] : Servlet.service() "
                f"threw exception [request {rng.getrandbits(64):016x}] with root cause",
                "java.net.SocketTimeoutException: Read timed out",
                "\tat java.base/sun.nio.ch.NioSocketImpl.timedRead(NioSocketImpl.java:288)",
                "\tat java.base/java.net.SocketInputStream.read(SocketInputStream.java:182)",
                f"\tat com.acme.inventory.InventoryClient.fetch(InventoryClient.java:{rng.randint(40, 90)})",
                f"\t... {rng.randint(20, 60)} more"]
    return [f"{stamp}  INFO 1 --- [http-nio-8080-exec-{rng.randint(1, 200)}] c.a.orders.OrderController : "
            f"GET /orders/{rng.randint(1, 99999)} 200 in {rng.randint(1, 900)} ms"]


def _java_cause(cause: int, stamp: str) -> list[str]:
    if cause == 0:
        return [f"{stamp} ERROR 1 --- [main] o.s.boot.SpringApplication : Application run failed",
                "org.springframework.beans.factory.BeanCreationException: Error creating bean 'dataSource'",
                "\tat org.springframework.beans.factory.support.AbstractBeanFactory.getBean(BeanFactory.java:20)",
                JAVA_CAUSES[0],
                "\tat org.postgresql.core.v3.ConnectionFactoryImpl.doAuthentication(ConnectionFactoryImpl.java:693)",
                "\t... 31 more"]
    return [JAVA_CAUSES[1],
            "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3512)",
            "\tat com.acme.settlement.BatchLoader.loadAll(BatchLoader.java:77)"]


def _pod_noise(rng: random.Random, stamp: str) -> list[str]:
    pod = f"payments-api-7d9f8-{rng.choice('bcdfghjk')}{rng.randint(0, 9)}{rng.choice('lmnpqrst')}{rng.randint(0, 9)}"
    if rng.random() < 0.5:  # the readiness probe fails on every check while the database is away
        return [f'[pod/{pod}/api] {stamp} {{"level":"error","msg":"readiness probe failed","status":503,'
                f'"latency_ms":{rng.randint(1, 5000)},"request_id":"{rng.getrandbits(48):012x}"}}']
    return [f'[pod/{pod}/api] {stamp} {{"level":"info","msg":"GET /healthz/live","status":200,'
            f'"latency_ms":{rng.randint(1, 40)}}}']


def _pod_cause(cause: int, stamp: str) -> list[str]:
    if cause == 0:
        return [f"[pod/payments-migrate-x8k2p/migrate] {stamp} {POD_CAUSES[0]}"]
    at = f"[pod/payments-worker-5c6b7-q2w9z/worker] {stamp}"
    return [f"{at} {POD_CAUSES[1]}", f"{at} [signal SIGSEGV: segmentation violation code=0x1 addr=0x0]",
            f"{at} goroutine 47 [running]:", f"{at} main.(*Settler).Run(0x0)"]


def _generate(size_bytes: int, seed: int, noise: Callable[[random.Random, str], list[str]],
              cause: Callable[[int, str], list[str]]) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    marks = {int(size_bytes * 0.31): 0, int(size_bytes * 0.74): 1}
    pending = sorted(marks)
    second = 0
    while size < size_bytes:
        second += rng.randint(0, 1)
        clock = f"{9 + second // 3600 % 10:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        stamp = f"2026-11-26T{clock}.{rng.randint(0, 999):03d}Z"
        lines = cause(marks[pending.pop(0)], stamp) if pending and size >= pending[0] else noise(rng, stamp)
        out += lines
        size += sum(len(line) + 1 for line in lines)
    return "\n".join(out) + "\n"


def java_log(size_bytes: int, seed: int = 7) -> str:
    """A Spring service's log: read timeouts with stack traces on ~45% of events, two rare causes."""
    return _generate(size_bytes, seed, _java_noise, _java_cause)


def pod_log(size_bytes: int, seed: int = 7) -> str:
    """`kubectl logs --prefix --timestamps` of a Deployment: readiness failures on half the lines."""
    return _generate(size_bytes, seed, _pod_noise, _pod_cause)
