// A @platformatic/kafka consumer using the consumer group protocol (KIP-848, groupProtocol 'consumer') for
// kcoord's integration tests; same stdout protocol as group_consumer.js (one JSON object per line:
// {"ev":"rec","p":0,"o":1,"k":"..."}, {"ev":"closed"}, {"ev":"error","error":"..."}).
// Usage: node kip848_consumer.mjs <bootstrap> <group> <topic> <clientId> [maxSeconds]
import { Consumer, stringDeserializers } from '@platformatic/kafka'

const [bootstrap, groupId, topic, clientId, maxSeconds = '150'] = process.argv.slice(2)
const emit = (event) => process.stdout.write(JSON.stringify(event) + '\n')

async function main () {
  const consumer = new Consumer({
    groupId, clientId, bootstrapBrokers: [bootstrap], groupProtocol: 'consumer',
    deserializers: stringDeserializers
  })
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    await consumer.close(true)
    emit({ ev: 'closed' })
    process.exit(0)
  }
  process.on('SIGTERM', stop)
  setTimeout(stop, Number(maxSeconds) * 1000)
  const stream = await consumer.consume({ topics: [topic], mode: 'committed', fallbackMode: 'earliest', autocommit: 200 })
  stream.on('error', (err) => emit({ ev: 'error', error: String(err) }))
  for await (const message of stream) {
    emit({ ev: 'rec', p: message.partition, o: Number(message.offset), k: message.key || null })
  }
}

main().catch((err) => { emit({ ev: 'error', error: String(err) }); process.exit(1) })
