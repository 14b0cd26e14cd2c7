/**
 * The proof a lasting change of an account needs beyond its session (docs/api.md, "Proof
 * for lasting changes"): a stolen access token alone must not add a factor, replace the
 * recovery codes or move the account to another address. Every such route runs this one
 * check: `currentPassword` from the body, checked as a password change checks it (the
 * client's budget of bcrypt-costing requests, then the account's budget of guesses: a wrong
 * one is 403 WRONG_PASSWORD, counted; 429 past either budget); missing, 400 BAD_REQUEST.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { BadRequest } from '../../lib/problem.js'
import type { AuthBudget } from './budget.js'

/** Throws unless the request proves it is the account's owner; the caller has authenticated it. */
export type RequireProof = (request: FastifyRequest, reply: FastifyReply) => Promise<void>

interface Dependencies {
  authBudget: AuthBudget
  checkCurrentPassword: (id: number, password: string, reply: FastifyReply) => Promise<void>
}

export function stepUp ({ authBudget, checkCurrentPassword }: Dependencies): RequireProof {
  return async function requireProof (request, reply) {
    const password = (request.body as { currentPassword?: unknown } | null | undefined)?.currentPassword
    if (typeof password !== 'string') throw new BadRequest('Send `currentPassword`: this change needs your current password')
    await authBudget(request, reply)
    await checkCurrentPassword(request.currentUser!.id, password, reply)
  }
}
