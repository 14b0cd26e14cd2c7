/** Schemas of the admin routes; users leave through the public `User` schema, never with a password hash. */
import { Type } from 'typebox'
import { User } from '../users/schemas.js'

export const AdminUserPage = Type.Object({
  items: Type.Array(User),
  nextCursor: Type.Union([Type.Integer(), Type.Null()], { description: 'pass as `cursor` for the next page; null on the last page' })
})
