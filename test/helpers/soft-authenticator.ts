/**
 * A WebAuthn authenticator in software, for tests: real P-256 keys (node:crypto), real ECDSA
 * signatures, `none` attestation. It plays the browser too: it writes clientDataJSON with the
 * origin it is given (a wrong one forges a phishing site). What a test can set: user
 * verification, the signature counter, the backup flags; a credential can be cloned (same
 * key, a counter of its own), as a copied key would be. Hostile registrations: a chosen
 * credential id (any length), another id in the JSON than in the authenticator data, a COSE
 * key padded with extra parameters; and a ceremony reported as run in a cross-origin frame.
 */
import { createHash, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto'
import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON
} from '@simplewebauthn/server'

/** The few CBOR types WebAuthn's structures need. */
type Cbor = number | string | Uint8Array | Map<number | string, Cbor>

/** Encodes a CBOR data item (RFC 8949): integers, byte and text strings, maps; keys in the order given. */
export function encodeCbor (value: Cbor): Buffer {
  const head = (major: number, n: number): Buffer => {
    if (n < 24) return Buffer.from([major << 5 | n])
    if (n < 0x100) return Buffer.from([major << 5 | 24, n])
    if (n < 0x10000) return Buffer.from([major << 5 | 25, n >> 8, n & 0xff])
    const b = Buffer.alloc(5)
    b[0] = major << 5 | 26
    b.writeUInt32BE(n, 1)
    return b
  }
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value)
  if (typeof value === 'string') return Buffer.concat([head(3, Buffer.byteLength(value)), Buffer.from(value)])
  if (value instanceof Uint8Array) return Buffer.concat([head(2, value.length), value])
  return Buffer.concat([head(5, value.size), ...[...value].flatMap(([k, v]) => [encodeCbor(k), encodeCbor(v)])])
}

const FLAG_UP = 0x01
const FLAG_UV = 0x04
const FLAG_BE = 0x08
const FLAG_BS = 0x10
const FLAG_AT = 0x40
const ES256 = -7

const sha256 = (data: string | Uint8Array): Buffer => createHash('sha256').update(data).digest()
const b64url = (data: Uint8Array): string => Buffer.from(data).toString('base64url')

export interface SoftCredential {
  /** The credential id, base64url (as in the JSON responses). */
  id: string
  rpId: string
  /** The user handle of the registration options (`user.id`, base64url). */
  userHandle: string
  /** Stored on the authenticator and returned as userHandle (a discoverable credential, a passkey). */
  discoverable: boolean
  privateKey: KeyObject
  /** The next assertion carries signCount + 1 (0 keeps it at 0: a counter-less authenticator). */
  signCount: number
  /** Set to count: false for an authenticator that always sends 0 (as synced passkeys do). */
  counts: boolean
}

export interface RegisterCall {
  userVerification?: boolean
  /** The credential id in the authenticator data (and the JSON `id`, unless `responseId`), base64url: forges someone else's, or an oversized one. */
  credentialId?: string
  /** Another `id`/`rawId` in the JSON than the authenticator data's. */
  responseId?: string
  /** Pads the COSE public key with an extra parameter of this many bytes. */
  coseExtraBytes?: number
  /** The client data says the ceremony ran in a cross-origin frame. */
  crossOrigin?: boolean
}

export interface SoftAuthenticatorOptions {
  /** The authenticator verifies the user (PIN, biometrics): the UV flag. Default true. */
  userVerification?: boolean
  /** Backup eligible and backed up (BE and BS flags: a synced passkey). Default false. */
  backedUp?: boolean
}

export class SoftAuthenticator {
  readonly credentials: SoftCredential[] = []
  userVerification: boolean
  backedUp: boolean

  constructor (options: SoftAuthenticatorOptions = {}) {
    this.userVerification = options.userVerification ?? true
    this.backedUp = options.backedUp ?? false
  }

  /** navigator.credentials.create(): a new key pair for the RP, answered as RegistrationResponseJSON. */
  register (options: PublicKeyCredentialCreationOptionsJSON, origin: string, call: RegisterCall = {}): RegistrationResponseJSON {
    const rpId = options.rp.id ?? new URL(origin).hostname
    if (!options.pubKeyCredParams.some((p) => p.alg === ES256)) throw new Error('NotSupportedError: the RP does not accept ES256')
    const excluded = new Set((options.excludeCredentials ?? []).map((c) => c.id))
    if (this.credentials.some((c) => c.rpId === rpId && excluded.has(c.id))) throw new Error('InvalidStateError: a credential of excludeCredentials is on this authenticator')
    const selection = options.authenticatorSelection ?? {}
    const discoverable = selection.residentKey === 'required' || selection.residentKey === 'preferred' || selection.requireResidentKey === true
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    // A chosen id forges a registration of someone else's credential id.
    const id = call.credentialId === undefined ? randomBytes(16) : Buffer.from(call.credentialId, 'base64url')
    const credential: SoftCredential = { id: call.responseId ?? b64url(id), rpId, userHandle: options.user.id, discoverable, privateKey, signCount: 0, counts: true }

    const jwk = publicKey.export({ format: 'jwk' })
    const cose = new Map<number, Cbor>([[1, 2], [3, ES256], [-1, 1], [-2, Buffer.from(jwk.x!, 'base64url')], [-3, Buffer.from(jwk.y!, 'base64url')]])
    // An unregistered label (COSE keeps unknown parameters) carrying padding.
    if (call.coseExtraBytes !== undefined) cose.set(1000, Buffer.alloc(call.coseExtraBytes, 0x61))
    const idLength = Buffer.alloc(2)
    idLength.writeUInt16BE(id.length)
    const authData = Buffer.concat([this.#header(rpId, FLAG_AT, call.userVerification, 0), Buffer.alloc(16), idLength, id, encodeCbor(cose)])
    const attestationObject = encodeCbor(new Map<string, Cbor>([['fmt', 'none'], ['attStmt', new Map()], ['authData', authData]]))
    this.credentials.push(credential)
    return {
      id: credential.id,
      rawId: credential.id,
      type: 'public-key',
      authenticatorAttachment: 'platform',
      clientExtensionResults: {},
      response: {
        clientDataJSON: this.#clientData('webauthn.create', options.challenge, origin, call.crossOrigin),
        attestationObject: b64url(attestationObject),
        authenticatorData: b64url(authData),
        publicKey: b64url(publicKey.export({ format: 'der', type: 'spki' })),
        publicKeyAlgorithm: ES256,
        transports: ['internal']
      }
    }
  }

  /**
   * navigator.credentials.get(): an assertion by the credential the options allow (with an
   * empty allowCredentials, a discoverable credential of the RP: `credentialId`, else the newest).
   */
  authenticate (options: PublicKeyCredentialRequestOptionsJSON, origin: string, call: { credentialId?: string, userVerification?: boolean, crossOrigin?: boolean } = {}): AuthenticationResponseJSON {
    const rpId = options.rpId ?? new URL(origin).hostname
    const allowed = options.allowCredentials ?? []
    const candidates = this.credentials.filter((c) => c.rpId === rpId && (allowed.length === 0 ? c.discoverable : allowed.some((a) => a.id === c.id)))
    const credential = call.credentialId === undefined ? candidates.at(-1) : candidates.find((c) => c.id === call.credentialId)
    if (credential === undefined) throw new Error(`NotAllowedError: no credential for ${rpId} on this authenticator`)
    if (credential.counts) credential.signCount += 1
    const authData = this.#header(rpId, 0, call.userVerification, credential.signCount)
    const clientDataJSON = this.#clientData('webauthn.get', options.challenge, origin, call.crossOrigin)
    const signature = sign('sha256', Buffer.concat([authData, sha256(Buffer.from(clientDataJSON, 'base64url'))]), credential.privateKey)
    return {
      id: credential.id,
      rawId: credential.id,
      type: 'public-key',
      authenticatorAttachment: 'platform',
      clientExtensionResults: {},
      response: {
        clientDataJSON,
        authenticatorData: b64url(authData),
        signature: b64url(signature), // DER, as WebAuthn's ES256 signatures are
        ...(credential.discoverable ? { userHandle: credential.userHandle } : {})
      }
    }
  }

  /** The credential with this id (throws if absent). */
  credential (id: string): SoftCredential {
    const found = this.credentials.find((c) => c.id === id)
    if (found === undefined) throw new Error(`no credential ${id} on this authenticator`)
    return found
  }

  /** Another authenticator holding a copy of this credential: the same key, its own counter. */
  clone (id: string): SoftAuthenticator {
    const copy = new SoftAuthenticator({ userVerification: this.userVerification, backedUp: this.backedUp })
    copy.credentials.push({ ...this.credential(id) })
    return copy
  }

  /** The public key of a credential, SPKI DER (what a server stores, as a cross-check). */
  publicKey (id: string): Buffer {
    return createPublicKey(this.credential(id).privateKey).export({ format: 'der', type: 'spki' })
  }

  /** rpIdHash | flags | signCount: the first 37 bytes of authenticatorData. */
  #header (rpId: string, extra: number, userVerification: boolean | undefined, signCount: number): Buffer {
    const uv = userVerification ?? this.userVerification
    const flags = FLAG_UP | (uv ? FLAG_UV : 0) | (this.backedUp ? FLAG_BE | FLAG_BS : 0) | extra
    const counter = Buffer.alloc(4)
    counter.writeUInt32BE(signCount)
    return Buffer.concat([sha256(rpId), Buffer.from([flags]), counter])
  }

  /** A cross-origin ceremony as a browser reports one in a frame (`crossOrigin: true`), without `topOrigin` as older browsers do. */
  #clientData (type: string, challenge: string, origin: string, crossOrigin = false): string {
    return b64url(Buffer.from(JSON.stringify({ type, challenge, origin, crossOrigin })))
  }
}
