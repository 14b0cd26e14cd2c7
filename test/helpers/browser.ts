/** Browser-client helpers: a form login in cookie mode, and the session cookies it sets. */
import type { LightMyRequestResponse } from 'fastify'
import { newUser, type TestApp } from './build.js'

export const ACCESS = '__Secure-access_token'
export const REFRESH = '__Secure-refresh_token'
export const SELF = 'http://localhost'

export interface Browser { id: number, username: string, password: string, access: string, refresh: string }

/** Registers a user and logs in with an HTML form (cookie mode). */
export async function formLogin (app: TestApp, headers: Record<string, string> = {}): Promise<{ res: LightMyRequestResponse, user: ReturnType<typeof newUser> & { id: number } }> {
  const user = newUser()
  const created = await app.inject({ method: 'POST', url: '/api/user', payload: user })
  const form = new URLSearchParams({ username: user.username, password: user.password }).toString()
  const res = await app.inject({ method: 'POST', url: '/api/auth/login', headers: { 'content-type': 'application/x-www-form-urlencoded', host: 'localhost', ...headers }, payload: form })
  return { res, user: { ...user, id: created.json().id } }
}

export function cookie (res: LightMyRequestResponse, name: string) {
  return res.cookies.find((c) => c.name === name)
}

export async function browser (app: TestApp): Promise<Browser> {
  const { res, user } = await formLogin(app)
  if (res.statusCode !== 200) throw new Error(`form login failed: ${res.statusCode} ${res.body}`)
  return { id: user.id, username: user.username, password: user.password, access: cookie(res, ACCESS)!.value, refresh: cookie(res, REFRESH)!.value }
}
