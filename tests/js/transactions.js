// kafkajs's transactional producer: one committed and one aborted transaction, then read back with
// read_committed (readUncommitted: false) and read_uncommitted consumers. Prints one JSON line:
// {committed: [...values], uncommitted: [...values]}. Usage: node transactions.js HOST:PORT TOPIC
const { Kafka, logLevel } = require('kafkajs')

async function readAll (kafka, topic, readUncommitted, expected) {
  const consumer = kafka.consumer({ groupId: `js-txn-${readUncommitted}-${Date.now()}`, readUncommitted })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const values = []
  await consumer.run({ eachMessage: async ({ message }) => { values.push(message.value.toString()) } })
  const deadline = Date.now() + 20000
  while (values.length < expected && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100))
  await new Promise((resolve) => setTimeout(resolve, 1000)) // anything beyond what is expected shows up too
  await consumer.disconnect()
  return values
}

async function main () {
  const [broker, topic] = process.argv.slice(2)
  const kafka = new Kafka({ clientId: 'kcoord-js-txn', brokers: [broker], logLevel: logLevel.ERROR })
  const producer = kafka.producer({ transactionalId: 'js-txn-1', maxInFlightRequests: 1, idempotent: true })
  await producer.connect()
  const committed = await producer.transaction()
  await committed.send({ topic, messages: [{ value: 'c1' }, { value: 'c2' }] })
  await committed.commit()
  const aborted = await producer.transaction()
  await aborted.send({ topic, messages: [{ value: 'a1' }] })
  await aborted.abort()
  const last = await producer.transaction()
  await last.send({ topic, messages: [{ value: 'c3' }] })
  await last.commit()
  await producer.disconnect()
  const result = {
    committed: await readAll(kafka, topic, false, 3),
    uncommitted: await readAll(kafka, topic, true, 4)
  }
  process.stdout.write(JSON.stringify(result) + '\n')
}

main().catch((err) => { console.error(err); process.exit(1) })
