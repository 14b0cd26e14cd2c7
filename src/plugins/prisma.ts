/** Decorates the app with `prisma`, disconnected when the app closes. */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { closePrismaClient, createPrismaClient, type ClientOptions, type PrismaClient } from '../db/client.js'

declare module 'fastify' {
  interface FastifyInstance {
    prisma: PrismaClient
  }
}

async function prismaPlugin (app: FastifyInstance, options: ClientOptions): Promise<void> {
  const prisma = createPrismaClient(options)
  app.decorate('prisma', prisma)
  app.addHook('onClose', async () => { await closePrismaClient(prisma) })
}

export default fp(prismaPlugin, { name: 'prisma', fastify: '5.x' })
