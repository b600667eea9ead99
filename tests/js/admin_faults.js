// kafkajs against faults injected through kcoord's admin endpoint (plain HTTP + JSON, as any language
// would drive it). Prints one JSON object per line with what the client did; tests/test_kafkajs_faults.py
// asserts on them.
// Usage: node admin_faults.js <bootstrap> <adminUrl> <topic>
const http = require('http')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, adminUrl, topic] = process.argv.slice(2)
const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function admin (method, path, body) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? '' : JSON.stringify(body)
    const req = http.request(adminUrl + path, {
      method, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) }
    }, (res) => {
      let text = ''
      res.on('data', (chunk) => { text += chunk })
      res.on('end', () => (res.statusCode < 300 ? resolve(JSON.parse(text)) : reject(new Error(`${res.statusCode} ${text}`))))
    })
    req.on('error', reject)
    req.end(data)
  })
}

// kafkajs wraps a protocol error it gives up on (KafkaJSNonRetriableError, the Kafka error as its cause)
const errorOf = (err) => ({ name: err.name, type: (err.originalError || err.cause || err).type || null })

async function tryCommit (consumer, offset) {
  try {
    await consumer.commitOffsets([{ topic, partition: 0, offset: String(offset) }])
    return 'ok'
  } catch (err) {
    return errorOf(err)
  }
}

const fault = async (id) => (await admin('GET', '/faults')).faults.find((f) => f.id === id)

async function until (check, ms = 30000) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out')
    await sleep(50)
  }
}

async function consume (kafka, groupId, autoCommit, count) {
  const consumer = kafka.consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 500 })
  const seen = []
  let joinedAt = null
  consumer.on(consumer.events.GROUP_JOIN, () => { joinedAt = joinedAt || Date.now() })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const startedAt = Date.now()
  await consumer.run({ autoCommit, eachMessage: async ({ message }) => { seen.push(Number(message.offset)) } })
  await until(async () => seen.length >= count)
  return { consumer, seen, startedAt, joinedAt }
}

async function committed (kafka, groupId) {
  const client = kafka.admin()
  await client.connect()
  const [{ partitions }] = await client.fetchOffsets({ groupId, topics: [topic] })
  await client.disconnect()
  return Number(partitions.find((p) => p.partition === 0).offset)
}

async function main () {
  const kafka = new Kafka({ clientId: 'js-app', brokers: [bootstrap], logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 8 } })
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, messages: Array.from({ length: 10 }, (_, i) => ({ value: `m-${i}` })) })
  await producer.disconnect()

  // 1. SyncGroup answered 1.5 s late: kafkajs waits for it (its request timeout is 30 s) and consumes.
  const slow = (await admin('POST', '/faults', { api: 'SyncGroup', action: 'delay', delay_ms: 1500,
    group_id: 'js-slow-sync', count: 1 })).faults[0]
  const first = await consume(kafka, 'js-slow-sync', true, 10)
  emit({ ev: 'slow_sync', joinMs: first.joinedAt - first.startedAt, consumed: first.seen.length,
    fired: (await fault(slow.id)).fired })
  await first.consumer.disconnect()

  // 2. OffsetCommit failing with a retriable error (NOT_COORDINATOR) once: kafkajs looks the coordinator
  //    up again and retries, and the commit lands.
  const retried = (await admin('POST', '/faults', { api: 'OffsetCommit', error: 'NOT_COORDINATOR',
    group_id: 'js-commit', count: 1 })).faults[0]
  const second = await consume(kafka, 'js-commit', false, 10)
  emit({ ev: 'commit_retriable', outcome: await tryCommit(second.consumer, 10), fired: (await fault(retried.id)).fired,
    committed: await committed(kafka, 'js-commit') })

  // 3. OffsetCommit failing with a non-retriable error: commitOffsets rejects with it, nothing is stored.
  const refused = (await admin('POST', '/faults', { api: 'OffsetCommit', error: 'GROUP_AUTHORIZATION_FAILED',
    group_id: 'js-commit', count: 1 })).faults[0]
  emit({ ev: 'commit_refused', outcome: await tryCommit(second.consumer, 5), fired: (await fault(refused.id)).fired,
    committed: await committed(kafka, 'js-commit') })
  await second.consumer.disconnect()
}

main().then(() => process.exit(0)).catch((err) => { emit({ ev: 'error', error: String(err && err.stack) }); process.exit(1) })
