// An idempotent acks=all kafkajs producer for the cluster failover test: sends `PREFIX-<n>` values, one
// message per send, keyed by the value (so they spread over the topic's partitions), until its stdin
// closes. Prints one JSON line per outcome: {"send": v}, {"ack": v, "partition", "offset"} or
// {"fail": v, "error"}; then {"done": true}. Usage: node idempotent_producer.js HOST:PORT[,..] TOPIC PREFIX
const { Kafka, logLevel } = require('kafkajs')

function emit (obj) { process.stdout.write(JSON.stringify(obj) + '\n') }

async function main () {
  const [brokers, topic, prefix] = process.argv.slice(2)
  let stopping = false
  process.stdin.on('end', () => { stopping = true })
  process.stdin.resume()
  const kafka = new Kafka({ clientId: 'kcoord-failover', brokers: brokers.split(','), logLevel: logLevel.NOTHING,
    requestTimeout: 10000, retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 } })
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false,
    metadataMaxAge: 5000 })
  await producer.connect()
  for (let n = 0; !stopping; n++) {
    const value = `${prefix}-${n}`
    emit({ send: value })
    try {
      const [r] = await producer.send({ topic, acks: -1, messages: [{ key: value, value }] })
      emit({ ack: value, partition: r.partition, offset: Number(r.baseOffset) })
    } catch (err) {
      emit({ fail: value, error: String(err) })
    }
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  await producer.disconnect()
  emit({ done: true })
}

main().catch((err) => { console.error(err); process.exit(1) })
