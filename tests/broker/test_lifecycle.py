"""Hooks, long polls, graceful shutdown and restart, metrics: in-process and as a real subprocess."""
from __future__ import annotations

import asyncio
import signal
import socket
import urllib.request

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kcoord.broker.app import Broker
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import build_batch, iter_batches
from kcoord.testkit.waiting import wait_until_async
from tests.broker.test_data_plane import create, fetch, produce, records_batch
from tests.support.raw_kafka import RawKafka

BOUND_S = 20.0


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
    await wait_until_async(lambda: ("longpoll", 0) in kcoord_broker.fetch_waiters._waiting,
                           BOUND_S, "the long poll parked")
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


def test_sigterm_with_pipelined_produces_answers_every_request_it_read(kcoord_plain_server):
    kcoord_server = kcoord_plain_server  # a plain `kcoord serve` process: its exit status after SIGTERM
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
    kcoord_server.kill()  # SIGKILL, then up again: even without a clean shutdown
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
    from kcoord.broker.config import BrokerConfig

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
        await wait_until_async(lambda: any(conn.state.reading_paused for conn in broker.server.connections),
                               BOUND_S, "reading paused")
        (conn,) = broker.server.connections
        assert conn.state.pending < count  # the rest waits in the socket buffers, not in our queue
        release.set()
        sent, answered = await asyncio.wait_for(talker, BOUND_S)
        assert answered == sent
    finally:
        await broker.stop()


def test_second_server_on_a_busy_port_fails_cleanly(kcoord_server, tmp_path):
    from tests.support.kcoord_server import KcoordServer, ServerFailed

    # a plain `kcoord serve` process on purpose: the command must exit 1 with one line, no ready line
    other = KcoordServer(tmp_path / "other", {"listeners": f"PLAINTEXT://127.0.0.1:{kcoord_server.port}"})
    with pytest.raises(ServerFailed):
        other.start(timeout=60)
    assert other.returncode == 1
    assert "cannot start" in other.log_text() and "kcoord ready" not in other.log_text()
    assert kcoord_server.running


async def test_request_in_flight_completes_when_its_client_disconnects(kcoord_broker: Broker):
    port = kcoord_broker.listeners[0].port
    with RawKafka(port) as c:
        await asyncio.to_thread(create, c, "orphan")
    entered, release, finished = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def hold(ctx, req):
        entered.set()
        await release.wait()

    kcoord_broker.hooks.before(0, hold)
    kcoord_broker.hooks.after(0, lambda ctx, req, resp: finished.set())

    def send_and_leave():
        with RawKafka(port) as c:
            c.send_request(0, 9, m.ProduceRequest(
                transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[m.ProduceRequest.TopicProduceData(
                    name="orphan", partition_data=[m.ProduceRequest.TopicProduceData.PartitionProduceData(
                        index=0, records=records_batch(2))])]))

    await asyncio.to_thread(send_and_leave)
    await asyncio.wait_for(entered.wait(), BOUND_S)
    await wait_until_async(lambda: not kcoord_broker.server.connections,
                           BOUND_S, "the disconnect")  # the server saw the disconnect
    release.set()
    await asyncio.wait_for(finished.wait(), BOUND_S)  # the handler ran to the end; its answer is dropped
    assert kcoord_broker.topics.log("orphan", 0).log_end_offset == 2


def test_idempotent_retry_across_restart_is_still_a_duplicate(kcoord_server):
    def idem_batch(n: int, seq: int, pid: int, epoch: int) -> bytes:
        return records_batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    with RawKafka(kcoord_server.port) as c:
        create(c, "idem-restart")
        init = c.request(22, 4, m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000,
                                                       producer_id=-1, producer_epoch=-1))
        pid, epoch = init.producer_id, init.producer_epoch
        assert produce(c, "idem-restart", idem_batch(3, 0, pid, epoch)).base_offset == 0
    kcoord_server.restart()
    with RawKafka(kcoord_server.port) as c:
        retry = produce(c, "idem-restart", idem_batch(3, 0, pid, epoch))  # state rebuilt from the log
        assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 0)
        assert produce(c, "idem-restart", idem_batch(1, 3, pid, epoch)).base_offset == 3
        gap = produce(c, "idem-restart", idem_batch(1, 7, pid, epoch))
        assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.kcoord(overrides={"offsets.topic.num.partitions": "4"})
async def test_consumer_offsets_topic_is_internal_and_compacted(kcoord_broker: Broker):
    log = kcoord_broker.consumer_offsets_log(3)
    assert (log.topic, log.partition) == ("__consumer_offsets", 3)
    assert log.config.cleanup_policy == "compact"
    port = kcoord_broker.listeners[0].port

    def inspect():
        with RawKafka(port) as c:
            md = c.request(3, 12, m.MetadataRequest(topics=None, allow_auto_topic_creation=False))
            (topic,) = [t for t in md.topics if t.name == "__consumer_offsets"]
            refused = produce(c, "__consumer_offsets", records_batch(1), partition=3)
            deleted = c.request(20, 6, m.DeleteTopicsRequest(
                topics=[m.DeleteTopicsRequest.DeleteTopicState(name="__consumer_offsets")], timeout_ms=1000))
            return topic, refused, deleted.responses[0]

    topic, refused, deleted = await asyncio.to_thread(inspect)
    assert topic.is_internal and len(topic.partitions) == kcoord_broker.config.get("offsets.topic.num.partitions")
    assert refused.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert deleted.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_sigint_stops_gracefully_too(kcoord_plain_server):
    kcoord_server = kcoord_plain_server  # a plain `kcoord serve` process: its exit status after SIGINT
    kcoord_server.proc.send_signal(signal.SIGINT)
    assert kcoord_server.proc.wait(BOUND_S) == 0
    kcoord_server.stop()
    assert "kcoord stopped" in kcoord_server.log_text()


async def test_restart_finishes_an_interrupted_topic_deletion(tmp_path):
    import json

    from kcoord.broker.config import BrokerConfig
    from kcoord.metadata.topics import METADATA_FILE

    cfg = BrokerConfig.load(overrides={"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "d")})
    broker = Broker(cfg)
    await broker.start()
    broker.topics.create("doomed", 2)
    broker.topics.create("kept", 1)
    await broker.stop()
    # A crash after the metadata dropped the topic but before its directories were removed:
    path = tmp_path / "d" / METADATA_FILE
    meta = json.loads(path.read_text())
    meta["topics"] = [t for t in meta["topics"] if t["name"] != "doomed"]
    path.write_text(json.dumps(meta))
    again = Broker(cfg)
    await again.start()
    try:
        assert again.topics.get("doomed") is None and again.topics.get("kept") is not None
        assert not any(t == "doomed" for t, _p in again.logs.partitions())
        assert not list((tmp_path / "d").glob("doomed-*"))
    finally:
        await again.stop()
