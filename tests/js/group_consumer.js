// A kafkajs group consumer for kcoord's integration tests; same stdout protocol as
// tests/broker/groups/workers/consumer.py: one JSON object per line
// ({"ev":"assigned","partitions":[..]}, {"ev":"rec","p":0,"o":1,"k":"..."}, {"ev":"closed"}).
// Usage: node group_consumer.js <bootstrap> <group> <topic> <clientId> [maxSeconds] [security JSON:
// {"protocol","ca","cert","key","mechanism","username","password"}, as tests/security/client_settings.py]
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, groupId, topic, clientId, maxSeconds = '150', securityJson = 'null'] = process.argv.slice(2)

function security (sec) {
  const out = {}
  if (!sec) return out
  if (sec.protocol.includes('SSL')) {
    out.ssl = { ca: [fs.readFileSync(sec.ca, 'utf-8')] }
    if (sec.cert) Object.assign(out.ssl, { cert: fs.readFileSync(sec.cert, 'utf-8'), key: fs.readFileSync(sec.key, 'utf-8') })
  }
  if (sec.mechanism) out.sasl = { mechanism: sec.mechanism.toLowerCase(), username: sec.username, password: sec.password }
  return out
}
const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n')

async function main () {
  const kafka = new Kafka({
    clientId, brokers: bootstrap.split(','), logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.NOTHING,
    logCreator: () => ({ level, log }) => process.stderr.write(JSON.stringify({ t: Date.now(), level, ...log }) + '\n'),
    retry: { initialRetryTime: 100, retries: 30 }, ...security(JSON.parse(securityJson))
  })
  const consumer = kafka.consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 1500 })
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    emit({ ev: 'assigned', partitions: (payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b) })
  })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    await consumer.disconnect()
    emit({ ev: 'closed' })
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  setTimeout(stop, Number(maxSeconds) * 1000)
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      emit({ ev: 'rec', p: partition, o: Number(message.offset), k: message.key ? message.key.toString() : null })
    }
  })
}

main().catch((err) => { emit({ ev: 'error', error: String(err) }); process.exit(1) })
