// A kafkajs group consumer for kcoord's integration tests; same stdout protocol as
// tests/broker/groups/workers/consumer.py: one JSON object per line
// ({"ev":"assigned","partitions":[..]}, {"ev":"rec","p":0,"o":1,"k":"..."}, {"ev":"closed"}).
// Usage: node group_consumer.js <bootstrap> <group> <topic> <clientId> [maxSeconds]
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, groupId, topic, clientId, maxSeconds = '150'] = process.argv.slice(2)
const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n')

async function main () {
  const kafka = new Kafka({
    clientId, brokers: [bootstrap], logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 30 }
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
