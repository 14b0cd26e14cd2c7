-- AlterTable
ALTER TABLE "sessions" ADD COLUMN     "ip" TEXT,
ADD COLUMN     "user_agent" TEXT;

