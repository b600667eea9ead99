"""Hooks, long polls, graceful shutdown and restart, metrics: in-process and as a real subprocess."""
from __future__ import annotations

import asyncio
import signal
import socket
import urllib.request

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.app import Broker
from protocol import messages as m
from protocol.errors import ErrorCode
from protocol.records import build_batch, iter_batches
from tests.broker.test_data_plane import create, fetch, produce, records_batch
from tests.support.raw_kafka import RawKafka

BOUND_S = 20.0


async def wait_until(predicate, timeout: float = BOUND_S) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_hooks_can_fail_replace_and_observe_requests(kcoord_broker: Broker):
    seen = []
    kcoord_broker.hooks.after(18, lambda ctx, req, resp: seen.append((ctx.api_version, resp.error_code)))
    remove = kcoord_broker.hooks.before(3, lambda ctx, req: m.MetadataResponse(
        brokers=[], cluster_id="hooked", controller_id=-1, topics=[]))
    port = kcoord_broker.listeners[0].port

    def talk():
        with RawKafka(port) as c:
            c.request(18, 3, m.ApiVersionsRequest(client_software_name="t", client_software_version="1"))
            return c.request(3, 2, m.MetadataRequest(topics=None)).cluster_id

    assert await asyncio.to_thread(talk) == "hooked"
    remove()

    def talk_v2():
        with RawKafka(port) as c:
            return c.request(3, 2, m.MetadataRequest(topics=None)).cluster_id

    assert await asyncio.to_thread(talk_v2) == kcoord_broker.cluster_id
    assert seen == [(3, ErrorCode.NONE)]

    def boom(ctx, req):
        raise RuntimeError("injected failure")

    kcoord_broker.hooks.before(3, boom)

    def failing():
        with RawKafka(port) as c:
            c.send_request(3, 1, m.MetadataRequest(topics=None))
            return c.closed_by_peer()

    assert await asyncio.to_thread(failing)


async def test_fetch_long_poll_returns_when_data_arrives(kcoord_broker: Broker):
    port = kcoord_broker.listeners[0].port
    with RawKafka(port) as c:
        await asyncio.to_thread(create, c, "longpoll")

    def long_poll():
        with RawKafka(port) as c:
            return fetch(c, "longpoll", 0, max_wait_ms=60000, min_bytes=1)

    waiter = asyncio.create_task(asyncio.to_thread(long_poll))
    # Parked: the fetch registered as waiting on the partition (it has no data and max_wait is long).
    await wait_until(lambda: ("longpoll", 0) in kcoord_broker.fetch_waiters._waiting)
    assert not waiter.done()
    with RawKafka(port) as c:
        await asyncio.to_thread(produce, c, "longpoll", records_batch(4))
    resp = await asyncio.wait_for(waiter, BOUND_S)
    part = resp.responses[0].partitions[0]
    assert [h.records_count for _p, h, _b in iter_batches(part.records)] == [4]


async def test_stop_answers_in_flight_produce_before_closing(kcoord_broker: Broker, tmp_path):
    port = kcoord_broker.listeners[0].port
    with RawKafka(port) as c:
        await asyncio.to_thread(create, c, "inflight")
    entered, release = asyncio.Event(), asyncio.Event()

    async def hold(ctx, req):
        entered.set()
        await release.wait()

    kcoord_broker.hooks.before(0, hold)

    def produce_once():
        with RawKafka(port) as c:
            return produce(c, "inflight", records_batch(3))

    in_flight = asyncio.create_task(asyncio.to_thread(produce_once))
    await asyncio.wait_for(entered.wait(), BOUND_S)
    stopping = asyncio.create_task(kcoord_broker.stop(timeout=BOUND_S))
    await asyncio.sleep(0)  # stop has begun: no new connections, this one drains
    release.set()
    resp = await asyncio.wait_for(in_flight, BOUND_S)
    await asyncio.wait_for(stopping, BOUND_S)
    assert (resp.error_code, resp.base_offset) == (ErrorCode.NONE, 0)

    # A new broker on the same data directory has the acknowledged records.
    again = Broker(kcoord_broker.config)
    await again.start()
    try:
        assert again.topics.log("inflight", 0).log_end_offset == 3
    finally:
        await again.stop()


def test_sigterm_is_graceful_and_restart_keeps_acknowledged_data(kcoord_server):
    bootstrap = kcoord_server.bootstrap
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
    futures = [producer.send("durable", key=b"k%d" % i, value=b"v%d" % i) for i in range(200)]
    producer.flush(BOUND_S)
    acked = {f.get(BOUND_S).offset for f in futures}
    producer.close()
    assert kcoord_server.stop() == 0
    assert "kcoord stopped" in kcoord_server.log_text()
    kcoord_server.start()
    consumer = KafkaConsumer(bootstrap_servers=kcoord_server.bootstrap, enable_auto_commit=False)
    consumer.assign([TopicPartition("durable", 0)])
    consumer.seek_to_beginning()
    got = []
    for _ in range(40):
        got += [r.offset for rs in consumer.poll(timeout_ms=500).values() for r in rs]
        if len(got) >= len(acked):
            break
    consumer.close()
    assert sorted(got) == sorted(acked) == list(range(200))


def test_sigterm_with_pipelined_produces_answers_every_request_it_read(kcoord_server):
    with RawKafka(kcoord_server.port) as c:
        create(c, "pipelined")
        sent = [c.send_request(0, 9, m.ProduceRequest(
            transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[m.ProduceRequest.TopicProduceData(
                name="pipelined", partition_data=[m.ProduceRequest.TopicProduceData.PartitionProduceData(
                    index=0, records=build_batch([(b"k", b"v%d" % i)]))])])) for i in range(100)]
        first_cid, first = c.read_response(0, 9)
        kcoord_server.proc.send_signal(signal.SIGTERM)
        answered = [(first_cid, first)]
        try:
            while len(answered) < len(sent):
                answered.append(c.read_response(0, 9))
        except (ConnectionError, OSError):
            pass
    assert kcoord_server.proc.wait(BOUND_S) == 0
    # Answers come in order, and each one that came is a success with the next offset.
    assert [cid for cid, _ in answered] == sent[:len(answered)]
    offsets = [r.responses[0].partition_responses[0].base_offset for _cid, r in answered]
    assert offsets == list(range(len(answered)))
    kcoord_server.start()
    with RawKafka(kcoord_server.port) as c:
        part = fetch(c, "pipelined", 0).responses[0].partitions[0]
    assert part.high_watermark >= len(answered)


def test_producer_ids_are_not_reused_after_restart(kcoord_server):
    def pid():
        with RawKafka(kcoord_server.port) as c:
            return c.request(22, 4, m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                                            producer_id=-1, producer_epoch=-1)).producer_id
    before = {pid() for _ in range(3)}
    kcoord_server.kill()  # even without a clean shutdown
    kcoord_server.start()
    assert pid() not in before


def test_metrics_endpoint_and_statsd(kcoord_server_factory):
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(BOUND_S)
    srv = kcoord_server_factory({"metrics.port": "0", "metrics.statsd.address": f"127.0.0.1:{udp.getsockname()[1]}",
                                 "metrics.statsd.interval.ms": "100"})
    with RawKafka(srv.port) as c:
        create(c, "measured")
        produce(c, "measured", records_batch(5))
        c.send_raw(b"\x00\x00\x00\x0a" + b"\x7f" * 10)  # unknown api key: closes
        c.closed_by_peer()
    text = urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=BOUND_S).read().decode()
    assert 'kcoord_requests_total{api="Produce",error_code="0"} 1' in text
    assert 'kcoord_requests_total{api="CreateTopics",error_code="0"} 1' in text
    assert 'kcoord_produced_records_total{topic="measured"} 5' in text
    assert "# TYPE kcoord_request_seconds summary" in text
    assert 'kcoord_storage_seconds_count{op="fsync"}' in text
    packets = b""
    while b"kcoord.requests_total.api.Produce" not in packets:
        packets += udp.recv(65536)
    udp.close()
    assert b"|c" in packets


async def test_reading_pauses_when_too_many_requests_are_queued(tmp_path):
    from broker.config import BrokerConfig

    cfg = BrokerConfig.load(overrides={"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "d"),
                                       "queued.max.requests": "4"})
    broker = Broker(cfg)
    await broker.start()
    try:
        release = asyncio.Event()

        async def hold(ctx, req):
            await release.wait()

        broker.hooks.before(18, hold)
        port = broker.listeners[0].port
        count = 64

        def pipeline():
            with RawKafka(port) as c:
                sent = [c.send_request(18, 0, m.ApiVersionsRequest()) for _ in range(count)]
                return sent, [c.read_response(18, 0)[0] for _ in sent]

        talker = asyncio.create_task(asyncio.to_thread(pipeline))
        await wait_until(lambda: any(conn.state.reading_paused for conn in broker.server.connections))
        (conn,) = broker.server.connections
        assert conn.state.pending < count  # the rest waits in the socket buffers, not in our queue
        release.set()
        sent, answered = await asyncio.wait_for(talker, BOUND_S)
        assert answered == sent
    finally:
        await broker.stop()


def test_second_server_on_a_busy_port_fails_cleanly(kcoord_server, tmp_path):
    import subprocess
    import sys

    from tests.support.kcoord_server import ROOT

    run = subprocess.run(
        [sys.executable, "-m", "broker", "serve", "--override", f"listeners=PLAINTEXT://127.0.0.1:{kcoord_server.port}",
         "--override", f"log.dirs={tmp_path / 'other'}"],
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "cannot start" in run.stderr and "kcoord ready" not in run.stdout
    assert kcoord_server.running
