// @platformatic/kafka's admin client against kcoord's client quotas (Describe/AlterClientQuotas), for
// tests/broker/quota/test_quota_clients.py. Prints one JSON object: what each call answered.
// Usage: node client_quotas.mjs <bootstrap>
import { Admin } from '@platformatic/kafka'

const [bootstrap] = process.argv.slice(2)

async function main () {
  const admin = new Admin({ clientId: 'quota-admin', bootstrapBrokers: [bootstrap] })
  const out = {}
  try {
    out.altered = await admin.alterClientQuotas({
      entries: [
        { entities: [{ entityType: 'client-id', entityName: 'js-app' }],
          ops: [{ key: 'producer_byte_rate', value: 1048576, remove: false },
                { key: 'consumer_byte_rate', value: 2097152, remove: false }] },
        { entities: [{ entityType: 'user', entityName: null }],
          ops: [{ key: 'request_percentage', value: 50, remove: false }] }
      ]
    })
    out.described = await admin.describeClientQuotas({ components: [{ entityType: 'client-id', matchType: 2 }] })
    out.defaults = await admin.describeClientQuotas({ components: [{ entityType: 'user', matchType: 1 }], strict: true })
    out.refused = await admin.alterClientQuotas({
      entries: [{ entities: [{ entityType: 'client-id', entityName: 'js-app' }],
                  ops: [{ key: 'producer_byte_rate', value: 1.5, remove: false }] }]
    }).catch((err) => ({ error: String(err), errors: (err.errors || []).map((e) => [String(e), e.response]) }))
  } finally {
    await admin.close()
  }
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().catch((err) => { process.stdout.write(JSON.stringify({ error: String(err) }) + '\n'); process.exit(1) })
