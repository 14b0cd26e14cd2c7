/**
 * deploy/kubernetes/ checked offline: no cluster runs here or in CI (docs/deployment.md,
 * "Kubernetes"). Every document of the kustomization is parsed as the API server's YAML
 * reader does (YAML 1.1, duplicate keys refused) and validated by `kubernetes-models`
 * against the Kubernetes v1.36 API schemas. What that validator lets through is checked
 * here: fields the schema does not know (it allows any), beta or removed API versions (it
 * ships them), Secrets written into the repository, Secret and ConfigMap keys nobody
 * creates, variables the service does not read or refuses, probe paths that are no route,
 * ports that do not line up, and a termination budget shorter than the service's drain.
 */
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { parseAllDocuments } from 'yaml'
import { envVariables, loadConfig, settings, type Config } from '../src/config.js'
import { READY_TIMEOUT_MS } from '../src/modules/health/routes.js'
import { build } from './helpers/build.js'

/** The schemas' Kubernetes version (kubernetes-models 5.x, pinned in package.json). */
const KUBERNETES = 'v1.36'
const DIR = new URL('../deploy/kubernetes/', import.meta.url)
const DOCS = new URL('../docs/deployment.md', import.meta.url)
/** PostgreSQL's default `max_connections` (postgres.yaml does not change it). */
const PG_MAX_CONNECTIONS = 100

type Obj = Record<string, any>
interface Manifest { file: string, doc: Obj }

/** Versions the model package still ships but Kubernetes removed, with the release that did. */
const REMOVED: Record<string, string> = {
  'extensions/v1beta1': '1.22',
  'apps/v1beta1': '1.16',
  'apps/v1beta2': '1.16',
  'networking.k8s.io/v1beta1': '1.22',
  'policy/v1beta1': '1.25',
  'batch/v1beta1': '1.25',
  'autoscaling/v2beta1': '1.25',
  'autoscaling/v2beta2': '1.26',
  'discovery.k8s.io/v1beta1': '1.25',
  'flowcontrol.apiserver.k8s.io/v1beta3': '1.32'
}

export function parseYaml (text: string, file: string): Obj[] {
  return parseAllDocuments(text, { version: '1.1', uniqueKeys: true }).flatMap((document, index) => {
    const problem = [...document.errors, ...document.warnings][0]
    if (problem !== undefined) throw new Error(`${file}, document ${index + 1}: ${problem.message}`)
    const value = document.toJS() as Obj | null
    return value === null ? [] : [value]
  })
}

/** The kustomization's documents, in its order; every YAML file of the folder must be in it. */
async function loadManifests (): Promise<{ kustomization: Obj, manifests: Manifest[], problems: string[] }> {
  const problems: string[] = []
  const [kustomization] = parseYaml(await readFile(new URL('kustomization.yaml', DIR), 'utf8'), 'kustomization.yaml') as [Obj]
  // This test reads the resources itself: a transformer it does not apply would go unchecked.
  for (const key of Object.keys(kustomization)) {
    if (!['apiVersion', 'kind', 'namespace', 'resources', 'images'].includes(key)) problems.push(`kustomization.yaml: ${key} is not applied by this test`)
  }
  const files = (await readdir(DIR)).filter((name) => /\.ya?ml$/.test(name) && name !== 'kustomization.yaml').sort()
  const listed = [...kustomization.resources as string[]].sort()
  for (const file of files) if (!listed.includes(file)) problems.push(`${file} is not in kustomization.yaml`)
  const manifests: Manifest[] = []
  for (const file of kustomization.resources as string[]) {
    for (const doc of parseYaml(await readFile(new URL(file, DIR), 'utf8'), file)) manifests.push({ file, doc })
  }
  return { kustomization, manifests, problems }
}

/**
 * A view of `value` that records which keys are read: a key the schema's validator never
 * looks at is a field the schema does not have (maps, such as labels, are enumerated).
 */
function tracked (value: unknown, at: string, read: Set<string>, present: Set<string>): unknown {
  if (value === null || typeof value !== 'object') return value
  for (const key of Object.keys(value)) present.add(`${at}/${key}`)
  return new Proxy(value, {
    get (target, key, receiver) {
      const inner: unknown = Reflect.get(target, key, receiver)
      if (typeof key !== 'string' || !Object.hasOwn(target, key)) return inner
      read.add(`${at}/${key}`)
      return tracked(inner, `${at}/${key}`, read, present)
    },
    ownKeys (target) {
      const keys = Reflect.ownKeys(target)
      for (const key of keys) if (typeof key === 'string') read.add(`${at}/${key}`)
      return keys
    }
  })
}

type ModelClass = (new (data: Obj) => { validate: () => void }) & { prototype: { validate: (this: unknown) => void } }

/** What the Kubernetes v1.36 schemas, and the checks they leave to us, say of one document. */
export async function schemaProblems (doc: Obj): Promise<string[]> {
  const { apiVersion, kind } = doc
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return ['no apiVersion or kind']
  if (REMOVED[apiVersion] !== undefined) return [`${apiVersion} was removed in Kubernetes ${REMOVED[apiVersion]}`]
  // A beta API may be off in a cluster, and goes away within a few releases.
  if (/v\d+(alpha|beta)\d+$/.test(apiVersion)) return [`${apiVersion} is not a stable API version`]
  let Model: ModelClass | undefined
  try {
    Model = (await import(`kubernetes-models/${apiVersion}`) as Record<string, ModelClass>)[kind]
  } catch {}
  if (Model === undefined) return [`${apiVersion} ${kind} is not in the Kubernetes ${KUBERNETES} API`]
  try {
    new Model(doc).validate()
  } catch (error) {
    return [(error as Error).message]
  }
  const read = new Set<string>()
  const present = new Set<string>()
  Model.prototype.validate.call(tracked(doc, '', read, present))
  return [...present].filter((field) => !read.has(field)).map((field) => `unknown field ${field}`)
}

interface Workload { file: string, kind: string, name: string, labels: Obj, pod: Obj }

const WORKLOADS = new Set(['Deployment', 'StatefulSet', 'Job', 'DaemonSet'])

function workloads (manifests: Manifest[]): Workload[] {
  return manifests.filter(({ doc }) => WORKLOADS.has(doc.kind)).map(({ file, doc }) => ({
    file, kind: doc.kind, name: doc.metadata.name, labels: doc.spec.template.metadata?.labels ?? {}, pod: doc.spec.template.spec
  }))
}

function the (manifests: Manifest[], kind: string, name: string): Obj {
  const found = manifests.find(({ doc }) => doc.kind === kind && doc.metadata?.name === name)
  if (found === undefined) throw new Error(`no ${kind} ${name}`)
  return found.doc
}

function selects (selector: Obj | undefined, labels: Obj): boolean {
  return Object.entries(selector?.matchLabels ?? {}).every(([key, value]) => labels[key] === value)
}

/** Secret name -> keys, from the `kubectl create secret` commands of the docs. */
export function documentedSecrets (markdown: string): Map<string, Set<string>> {
  const secrets = new Map<string, Set<string>>()
  for (const line of markdown.replace(/\\\n\s*/g, ' ').split('\n')) {
    const command = /kubectl (?:-n \S+ )?create secret (generic|tls) (\S+)(.*)/.exec(line)
    if (command === null) continue
    const keys = command[1] === 'tls' ? ['tls.crt', 'tls.key'] : [...command[3]!.matchAll(/--from-(?:literal|file)=([^=\s]+)=/g)].map((match) => match[1]!)
    secrets.set(command[2]!, new Set(keys))
  }
  return secrets
}

/** Problems with the Secrets and ConfigMaps the manifests use. */
export function referenceProblems (manifests: Manifest[], documented: Map<string, Set<string>>): string[] {
  const problems: string[] = []
  for (const { file, doc } of manifests) {
    if (doc.kind === 'Secret') problems.push(`${file}: Secret ${doc.metadata?.name} is written into the repository; document the command that creates it`)
  }
  const configMaps = new Map(manifests.filter(({ doc }) => doc.kind === 'ConfigMap').map(({ doc }) => [doc.metadata.name as string, new Set(Object.keys(doc.data ?? {}))]))
  const secretKey = (where: string, name: string, key?: string): void => {
    const keys = documented.get(name)
    if (keys === undefined) problems.push(`${where}: Secret ${name} is created by no command of docs/deployment.md`)
    else if (key !== undefined && !keys.has(key)) problems.push(`${where}: Secret ${name} has no key ${key} in docs/deployment.md's command`)
  }
  const configKey = (where: string, name: string, key?: string): void => {
    const keys = configMaps.get(name)
    if (keys === undefined) problems.push(`${where}: no ConfigMap ${name}`)
    else if (key !== undefined && !keys.has(key)) problems.push(`${where}: ConfigMap ${name} has no key ${key}`)
  }
  for (const { file, name, pod } of workloads(manifests)) {
    for (const volume of pod.volumes ?? []) {
      const where = `${file} ${name} volume ${volume.name}`
      if (volume.secret !== undefined) {
        if (volume.secret.items === undefined) secretKey(where, volume.secret.secretName)
        for (const item of volume.secret.items ?? []) secretKey(where, volume.secret.secretName, item.key)
      }
      if (volume.configMap !== undefined) for (const item of volume.configMap.items ?? [{}]) configKey(where, volume.configMap.name, item.key)
    }
    for (const container of [...pod.initContainers ?? [], ...pod.containers]) {
      const where = `${file} ${name} container ${container.name}`
      for (const source of container.envFrom ?? []) {
        if (source.secretRef !== undefined) secretKey(where, source.secretRef.name)
        if (source.configMapRef !== undefined) configKey(where, source.configMapRef.name)
      }
      for (const variable of container.env ?? []) {
        const from = variable.valueFrom
        if (from?.secretKeyRef !== undefined) secretKey(where, from.secretKeyRef.name, from.secretKeyRef.key)
        if (from?.configMapKeyRef !== undefined) configKey(where, from.configMapKeyRef.name, from.configMapKeyRef.key)
      }
    }
  }
  for (const { file, doc } of manifests) {
    if (doc.kind === 'Ingress') for (const tls of doc.spec.tls ?? []) secretKey(`${file} Ingress ${doc.metadata.name}`, tls.secretName)
  }
  return problems
}

/** The variables a container of the service gets: its ConfigMaps' keys, then its own `env`. */
function containerEnv (manifests: Manifest[], container: Obj): Record<string, string> {
  const env: Record<string, string> = {}
  for (const source of container.envFrom ?? []) {
    if (source.configMapRef !== undefined) Object.assign(env, the(manifests, 'ConfigMap', source.configMapRef.name).data)
  }
  for (const variable of container.env ?? []) env[variable.name] = variable.value
  return env
}

/** Names a container sets that the service does not read (src/config.ts). */
export function unknownSettings (env: Record<string, string>): string[] {
  const known = new Set(envVariables())
  const fromFile = new Set(settings().filter((leaf) => leaf.schema.fromFile === true).map((leaf) => `${leaf.env}_FILE`))
  return Object.keys(env).filter((name) => !known.has(name) && !fromFile.has(name))
}

/** Secret values of the right shape, standing in for the ones the documented command makes. */
const SAMPLE_SECRETS: Record<string, string> = {
  secret: 'x'.repeat(64),
  'db-password': 'a-database-password',
  'smtp-url': 'smtp://user:password@smtp.example.com:587'
}

const secretFolder = await mkdtemp(path.join(tmpdir(), 'k8s-secrets-'))
t.teardown(() => rm(secretFolder, { recursive: true, force: true }))
const loadedConfigs = new Map<Obj, Config>()

/**
 * The service's own configuration loader fed with what a container gets: each `*_FILE`
 * path must lead, through a volume mount, to a key of the mounted Secret (here a file with
 * a sample value).
 */
async function loadContainerConfig (manifests: Manifest[], pod: Obj, container: Obj): Promise<Config> {
  const cached = loadedConfigs.get(container)
  if (cached !== undefined) return cached
  const env = containerEnv(manifests, container)
  for (const [name, value] of Object.entries(env)) {
    if (!name.endsWith('_FILE')) continue
    const mount = (container.volumeMounts ?? []).find((m: Obj) => value.startsWith(m.mountPath.replace(/\/?$/, '/')))
    const volume = (pod.volumes ?? []).find((v: Obj) => v.name === mount?.name)
    const relative = mount === undefined ? undefined : value.slice(mount.mountPath.replace(/\/?$/, '/').length)
    const item = volume?.secret?.items?.find((i: Obj) => i.path === relative)
    if (item === undefined || SAMPLE_SECRETS[item.key] === undefined) throw new Error(`${container.name}: ${name}=${value} leads to no key of a mounted Secret`)
    const file = path.join(secretFolder, item.key)
    await writeFile(file, SAMPLE_SECRETS[item.key] + '\n')
    env[name] = file
  }
  const config = loadConfig(env, false)
  loadedConfigs.set(container, config)
  return config
}

function api (manifests: Manifest[]): { deployment: Obj, pod: Obj, container: Obj } {
  const deployment = the(manifests, 'Deployment', 'api')
  const pod = deployment.spec.template.spec
  return { deployment, pod, container: pod.containers.find((c: Obj) => c.name === 'api') }
}

const loaded = await loadManifests()
const { manifests } = loaded
const deploymentDoc = await readFile(DOCS, 'utf8')
const kubernetesSection = /^## Kubernetes\n([\s\S]*?)(?=^## |(?![\s\S]))/m.exec(deploymentDoc)?.[1] ?? ''

t.test('every YAML file of deploy/kubernetes is in the kustomization, and parses', async (t) => {
  t.same(loaded.problems, [])
  t.ok(manifests.length >= 10, `${manifests.length} documents`)
  for (const { file, doc } of manifests) {
    if (doc.metadata?.namespace !== undefined) t.equal(doc.metadata.namespace, loaded.kustomization.namespace, `${file}: the kustomization's namespace`)
  }
  t.throws(() => parseYaml('a: 1\na: 2\n', 'x.yaml'), /x\.yaml, document 1: .*unique/i, 'a duplicate key is refused')
})

t.test(`every document validates against the Kubernetes ${KUBERNETES} schemas, with no unknown field and a stable API version`, async (t) => {
  for (const { file, doc } of manifests) {
    t.same(await schemaProblems(doc), [], `${file}: ${doc.kind} ${doc.metadata?.name}`)
  }
})

t.test('the schema checks catch a wrong type, an unknown field, a removed or beta API and an unknown kind', async (t) => {
  const { deployment } = api(manifests)
  const copy = (): Obj => structuredClone(deployment)
  const wrongType = copy()
  wrongType.spec.template.spec.containers[0].ports[0].containerPort = 'http'
  t.match(await schemaProblems(wrongType), [/containerPort must be integer/])
  const typo = copy()
  typo.spec.template.spec.containers[0].readinesProbe = typo.spec.template.spec.containers[0].readinessProbe
  typo.spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem = true
  t.same((await schemaProblems(typo)).sort(), [
    'unknown field /spec/template/spec/containers/0/readinesProbe',
    'unknown field /spec/template/spec/containers/0/securityContext/readOnlyRootFileSystem'
  ], 'each misspelt field is named')
  const pdb = the(manifests, 'PodDisruptionBudget', 'api')
  t.same(await schemaProblems({ ...pdb, apiVersion: 'policy/v1beta1' }), ['policy/v1beta1 was removed in Kubernetes 1.25'])
  t.same(await schemaProblems({ ...the(manifests, 'HorizontalPodAutoscaler', 'api'), apiVersion: 'autoscaling/v2beta2' }), ['autoscaling/v2beta2 was removed in Kubernetes 1.26'])
  t.same(await schemaProblems({ ...pdb, apiVersion: 'resource.k8s.io/v1beta2' }), ['resource.k8s.io/v1beta2 is not a stable API version'])
  t.same(await schemaProblems({ ...pdb, kind: 'PodDisruptionBudgt' }), ['policy/v1 PodDisruptionBudgt is not in the Kubernetes v1.36 API'])
})

t.test('no Secret is in the repository; every Secret and ConfigMap key used is created by the manifests or the documented commands', async (t) => {
  const documented = documentedSecrets(kubernetesSection)
  t.same([...documented.keys()].sort(), ['user-product-service', 'user-product-service-tls'], 'docs/deployment.md creates the Secrets')
  t.same([...documented.get('user-product-service') ?? []].sort(), Object.keys(SAMPLE_SECRETS).sort())
  t.same(referenceProblems(manifests, documented), [])
  const literal: Manifest = { file: 'extra.yaml', doc: { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'leak' }, stringData: { secret: 'x' } } }
  const withoutSmtp = new Map([...documented, ['user-product-service', new Set(['secret', 'db-password'])]])
  t.same(referenceProblems([...manifests, literal], withoutSmtp), [
    'extra.yaml: Secret leak is written into the repository; document the command that creates it',
    'migrate-job.yaml migrate volume secrets: Secret user-product-service has no key smtp-url in docs/deployment.md\'s command',
    'api.yaml api volume secrets: Secret user-product-service has no key smtp-url in docs/deployment.md\'s command'
  ], 'a literal Secret and an undocumented key are named')
})

t.test('every variable the API and the migration Job set is a setting, and the service accepts them in production', async (t) => {
  for (const workload of workloads(manifests).filter((w) => w.labels['app.kubernetes.io/name'] === 'user-product-service' && ['api', 'migrate'].includes(w.labels['app.kubernetes.io/component']))) {
    for (const container of workload.pod.containers) {
      const env = containerEnv(manifests, container)
      t.same(unknownSettings(env), [], `${workload.name}: every name is a setting of src/config.ts`)
      const config = await loadContainerConfig(manifests, workload.pod, container)
      t.equal(config.server.env, 'production', `${workload.name}: production`)
      t.equal(config.database.host, 'postgres', `${workload.name}: the database Service`)
      t.equal(config.database.password, SAMPLE_SECRETS['db-password'], `${workload.name}: the password from the Secret's file`)
      t.equal(config.database.migrateOnStart, false, `${workload.name}: replicas leave migrations to the Job`)
      t.same(config.retired, [], `${workload.name}: no retired variable`)
    }
  }
  t.same(unknownSettings({ PORT: '3000', UPLOAD_DIRS: '/x', SECRET_FILE: '/s', BODY_LIMIT_FILE: '/b' }), ['UPLOAD_DIRS', 'BODY_LIMIT_FILE'], 'a misspelt name and a `_FILE` twin of a plain setting are named')
})

/**
 * The variables Kubernetes adds to a pod for each Service of its namespace unless
 * `enableServiceLinks: false`: a Service named `db` would set `DB_PORT=tcp://10.0.0.7:5432`,
 * which the service refuses (or worse, reads) as its own setting.
 */
export function serviceLinkClashes (manifests: Manifest[], pod: Obj): string[] {
  if (pod.enableServiceLinks === false) return []
  const known = new Set(envVariables())
  return manifests.filter(({ doc }) => doc.kind === 'Service').flatMap(({ doc }) => {
    const prefix = (doc.metadata.name as string).toUpperCase().replaceAll('-', '_')
    const names = [`${prefix}_SERVICE_HOST`, `${prefix}_SERVICE_PORT`, `${prefix}_PORT`,
      ...(doc.spec.ports as Obj[]).flatMap((p) => [`${prefix}_SERVICE_PORT_${String(p.name ?? '').toUpperCase().replaceAll('-', '_')}`, ...['', '_PROTO', '_PORT', '_ADDR'].map((end) => `${prefix}_PORT_${p.port}_${(p.protocol ?? 'TCP') as string}${end}`)])]
    return names.filter((name) => known.has(name))
  })
}

t.test('no Service of the namespace sets one of the service\'s variables in its pods', async (t) => {
  for (const { file, name, pod } of workloads(manifests)) t.same(serviceLinkClashes(manifests, pod), [], `${file} ${name}`)
  const db: Manifest = { file: 'db.yaml', doc: { apiVersion: 'v1', kind: 'Service', metadata: { name: 'db' }, spec: { ports: [{ name: 'postgres', port: 5432 }] } } }
  t.same(serviceLinkClashes([db], { containers: [] }), ['DB_PORT'], 'with service links, a Service named db would set DB_PORT')
  t.same(serviceLinkClashes([db], { containers: [], enableServiceLinks: false }), [], 'enableServiceLinks: false sets none')
})

t.test('every pod runs non-root on a read-only root filesystem with no privilege, and every container has resources', async (t) => {
  for (const { file, name, pod } of workloads(manifests)) {
    t.equal(pod.securityContext?.runAsNonRoot, true, `${file} ${name}: runAsNonRoot`)
    t.ok(pod.securityContext?.runAsUser > 0, `${file} ${name}: a non-root uid`)
    t.equal(pod.securityContext?.seccompProfile?.type, 'RuntimeDefault', `${file} ${name}: seccomp`)
    t.equal(pod.automountServiceAccountToken, false, `${file} ${name}: no API token`)
    t.notOk(pod.hostNetwork || pod.hostPID || pod.hostIPC, `${file} ${name}: no host namespaces`)
    t.notOk((pod.volumes ?? []).some((v: Obj) => v.hostPath !== undefined), `${file} ${name}: no hostPath`)
    for (const container of [...pod.initContainers ?? [], ...pod.containers]) {
      const where = `${file} ${name}/${container.name}`
      const context = container.securityContext ?? {}
      t.equal(context.allowPrivilegeEscalation, false, `${where}: no privilege escalation`)
      t.equal(context.readOnlyRootFilesystem, true, `${where}: read-only root filesystem`)
      t.same(context.capabilities?.drop, ['ALL'], `${where}: every capability dropped`)
      t.notOk(context.capabilities?.add, `${where}: none added`)
      t.notOk(context.privileged, `${where}: not privileged`)
      t.ok(container.resources?.requests?.cpu && container.resources?.requests?.memory, `${where}: requests`)
      t.ok(container.resources?.limits?.memory, `${where}: a memory limit`)
    }
  }
})

t.test('the API keeps nothing on its pod: its one writable mount is /tmp, an emptyDir', async (t) => {
  const { pod, container } = api(manifests)
  const writable = (container.volumeMounts as Obj[]).filter((m) => m.readOnly !== true)
  t.same(writable.map((m) => m.mountPath), ['/tmp'])
  t.ok(writable.every((m) => (pod.volumes as Obj[]).find((v) => v.name === m.name)?.emptyDir !== undefined), 'an emptyDir, gone with the pod')
  t.notOk(envVariables().includes('UPLOAD_DIR'), 'no setting names a folder of product images (they are kept in PostgreSQL)')
})

t.test('the probes ask real routes of the service on its container port', async (t) => {
  const { pod, container } = api(manifests)
  const env = containerEnv(manifests, container)
  const [port] = container.ports
  t.equal(port.containerPort, Number(env.PORT), 'the container port is the PORT the service listens on')
  t.equal(env.HOST, '0.0.0.0', 'listening on every interface of the pod')
  const probes = { startupProbe: '/health/live', livenessProbe: '/health/live', readinessProbe: '/health/ready' }
  const app = await build(t)
  for (const [probe, expected] of Object.entries(probes)) {
    const get = container[probe]?.httpGet
    t.equal(get?.path, expected, `${probe}: ${expected}`)
    t.equal(get?.port, port.name, `${probe}: the container's port`)
    const answer = await app.inject({ method: 'GET', url: get.path })
    t.equal(answer.statusCode, 200, `${probe}: GET ${get.path} answers 200 on a current schema`)
  }
  t.equal((await app.inject({ method: 'GET', url: '/health/readyz' })).statusCode, 404, 'a path that is no route is a 404, which a probe would take for a failure')
  t.ok(container.readinessProbe.timeoutSeconds * 1000 > READY_TIMEOUT_MS, `the readiness timeout exceeds the route's own bound (${READY_TIMEOUT_MS} ms)`)
  t.ok(container.livenessProbe.httpGet.path !== container.readinessProbe.httpGet.path, 'liveness does not depend on the database')
  t.equal(pod.containers.length, 1)
})

t.test('termination outlasts the preStop pause and the service\'s own drain and grace period', async (t) => {
  const { pod, container } = api(manifests)
  const config = await loadContainerConfig(manifests, pod, container)
  const preStopMs = container.lifecycle.preStop.sleep.seconds * 1000
  const { shutdownDrainMs, shutdownGraceMs } = config.server
  t.ok(shutdownDrainMs > 0 && shutdownDrainMs < shutdownGraceMs, `SHUTDOWN_DRAIN_MS ${shutdownDrainMs} within SHUTDOWN_GRACE_MS ${shutdownGraceMs}`)
  t.ok(pod.terminationGracePeriodSeconds * 1000 >= preStopMs + shutdownGraceMs + 2000,
    `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} s >= preStop ${preStopMs} ms + SHUTDOWN_GRACE_MS ${shutdownGraceMs} ms + 2 s: the service exits before SIGKILL`)
  const { deployment } = api(manifests)
  t.same(deployment.spec.strategy.rollingUpdate, { maxSurge: 1, maxUnavailable: 0 }, 'an old replica goes once a new one is ready')
})

t.test('selectors, ports, autoscaling and the database connection budget line up', async (t) => {
  const all = workloads(manifests)
  const podsOf = (selector: Obj | undefined): Workload[] => all.filter((w) => selects(selector, w.labels))
  const portNames = (ws: Workload[]): Set<string> => new Set(ws.flatMap((w) => w.pod.containers.flatMap((c: Obj) => (c.ports ?? []).map((p: Obj) => p.name))))
  for (const { file, doc } of manifests) {
    const where = `${file} ${doc.kind} ${doc.metadata.name}`
    if (WORKLOADS.has(doc.kind) && doc.kind !== 'Job') t.ok(selects(doc.spec.selector, doc.spec.template.metadata.labels), `${where}: selects its own pods`)
    if (doc.kind === 'Service') {
      const pods = podsOf({ matchLabels: doc.spec.selector })
      t.ok(pods.length > 0, `${where}: selects pods`)
      for (const port of doc.spec.ports) t.ok(portNames(pods).has(port.targetPort), `${where}: targetPort ${port.targetPort} is a named container port`)
    }
    if (doc.kind === 'PodDisruptionBudget') t.ok(podsOf(doc.spec.selector).length > 0, `${where}: selects pods`)
    if (doc.kind === 'NetworkPolicy') {
      const pods = podsOf(doc.spec.podSelector)
      t.ok(Object.keys(doc.spec.podSelector).length === 0 || pods.length > 0, `${where}: selects pods`)
      for (const rule of doc.spec.ingress ?? []) {
        for (const port of rule.ports ?? []) t.ok(portNames(pods).has(port.port), `${where}: port ${port.port} is a named port of its pods`)
        for (const peer of rule.from ?? []) if (peer.podSelector !== undefined) t.ok(podsOf(peer.podSelector).length > 0, `${where}: a peer selects pods`)
      }
    }
    if (doc.kind === 'Ingress') {
      for (const rule of doc.spec.rules) {
        for (const { backend } of rule.http.paths) {
          const service = the(manifests, 'Service', backend.service.name)
          t.ok(service.spec.ports.some((p: Obj) => p.name === backend.service.port.name), `${where}: a port of Service ${backend.service.name}`)
        }
      }
    }
  }
  const { deployment, pod, container } = api(manifests)
  t.equal(deployment.spec.replicas, undefined, 'the HPA owns the replica count')
  const hpa = the(manifests, 'HorizontalPodAutoscaler', 'api')
  t.same(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'api' })
  t.ok(hpa.spec.minReplicas >= 2, 'two replicas at least: one can be evicted (PodDisruptionBudget)')
  const config = await loadContainerConfig(manifests, pod, container)
  t.equal(config.database.replicas, hpa.spec.maxReplicas, 'API_REPLICAS is the HPA\'s maxReplicas (the pool budget check)')
  t.ok(config.database.poolSize * hpa.spec.maxReplicas + 1 < PG_MAX_CONNECTIONS, `${hpa.spec.maxReplicas} replicas x DB_POOL_SIZE ${config.database.poolSize} + the Job under max_connections ${PG_MAX_CONNECTIONS}`)
  const postgres = the(manifests, 'StatefulSet', 'postgres').spec.template.spec.containers[0]
  t.notOk(JSON.stringify(postgres.args ?? []).includes('max_connections'), 'PostgreSQL keeps its default max_connections')
  const publicHost = new URL(config.mail.publicUrl).host
  t.ok(the(manifests, 'Ingress', 'api').spec.rules.some((r: Obj) => r.host === publicHost), 'the Ingress serves PUBLIC_URL\'s host')
})

t.test('docs/deployment.md, "Kubernetes", names real settings, files and routes', async (t) => {
  t.ok(kubernetesSection.length > 0, 'the section exists')
  const known = new Set([...envVariables(), ...settings().filter((l) => l.schema.fromFile === true).map((l) => `${l.env}_FILE`)])
  const named = new Set([...kubernetesSection.matchAll(/`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)(?:=[^`]*)?`/g)].map((m) => m[1]!))
  const postgresImage = new Set(['POSTGRES_PASSWORD_FILE'])
  t.same([...named].filter((name) => !known.has(name) && !postgresImage.has(name)), [], 'every variable named is a setting')
  const routes = new Set(Object.values(api(manifests).container).flatMap((v: any) => v?.httpGet?.path ?? []))
  const paths = [...kubernetesSection.matchAll(/`(\/health\/[a-z]+)`/g)].map((m) => m[1]!)
  t.ok(paths.length > 0, 'the probes are named')
  t.same(paths.filter((p) => !routes.has(p)), [], 'every health route named is one the probes ask (tested above)')
  const files = [...kubernetesSection.matchAll(/deploy\/kubernetes\/([a-z-]+\.yaml)/g)].map((m) => m[1]!)
  t.same(files.filter((f) => !loaded.kustomization.resources.includes(f) && f !== 'kustomization.yaml'), [], 'every manifest named is in the kustomization')
})
