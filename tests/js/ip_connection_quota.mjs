// @platformatic/kafka's admin client sets an ip's connection_creation_rate (AlterClientQuotas, entity ip), then,
// told so by a line on stdin, removes it over the same connections: for
// tests/broker/quota/test_connection_quotas_e2e.py. Prints one JSON line per call: the per-entity error codes.
// Usage: node ip_connection_quota.mjs <bootstrap> <ip> <rate>
import { createInterface } from 'node:readline'
import { Admin } from '@platformatic/kafka'

const [bootstrap, ip, rate] = process.argv.slice(2)
const entities = [{ entityType: 'ip', entityName: ip }]

async function alter (admin, op) {
  const altered = await admin.alterClientQuotas({ entries: [{ entities, ops: [op] }] })
  process.stdout.write(JSON.stringify({ errors: altered.map((e) => e.errorCode) }) + '\n')
}

async function main () {
  const admin = new Admin({ clientId: 'ip-quota-admin', bootstrapBrokers: [bootstrap] })
  try {
    await alter(admin, { key: 'connection_creation_rate', value: Number(rate), remove: false })
    const lines = createInterface({ input: process.stdin })
    for await (const line of lines) {
      if (line.trim() === 'remove') {
        await alter(admin, { key: 'connection_creation_rate', remove: true })
        break
      }
    }
    lines.close()
  } finally {
    await admin.close()
  }
}

main().catch((err) => { process.stdout.write(JSON.stringify({ error: String(err) }) + '\n'); process.exit(1) })
