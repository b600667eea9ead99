// Produce N keyed messages with a header using kafkajs; print one JSON line per acknowledged
// message: {key, partition, offset}. Usage: node produce.js HOST:PORT TOPIC N
const { Kafka, logLevel } = require('kafkajs')

async function main () {
  const [broker, topic, count] = process.argv.slice(2)
  const kafka = new Kafka({ clientId: 'kcoord-js-test', brokers: [broker], logLevel: logLevel.ERROR,
    retry: { retries: 3 } })
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const messages = []
  for (let i = 0; i < Number(count); i++) {
    messages.push({ key: `k${i}`, value: `v${i}-kafkajs`, headers: { src: 'kafkajs', i: String(i) } })
  }
  // One send per message batch of 10, acks=-1, so each result names its partition and base offset.
  for (let i = 0; i < messages.length; i += 10) {
    const chunk = messages.slice(i, i + 10)
    const results = await producer.send({ topic, acks: -1, messages: chunk })
    for (const r of results) process.stdout.write(JSON.stringify(r) + '\n')
  }
  await producer.disconnect()
}

main().catch((err) => { console.error(err); process.exit(1) })
