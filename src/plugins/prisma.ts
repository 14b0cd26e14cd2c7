/** Decorates the app with `prisma`, disconnected when the app closes. */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { createPrismaClient, type PrismaClient } from '../db/client.js'

declare module 'fastify' {
  interface FastifyInstance {
    prisma: PrismaClient
  }
}

export interface PrismaPluginOptions {
  url: string
  poolSize?: number
}

async function prismaPlugin (app: FastifyInstance, options: PrismaPluginOptions): Promise<void> {
  const prisma = createPrismaClient({ url: options.url, poolSize: options.poolSize })
  app.decorate('prisma', prisma)
  app.addHook('onClose', async () => { await prisma.$disconnect() })
}

export default fp(prismaPlugin, { name: 'prisma', fastify: '5.x' })
