-- CreateExtension
CREATE EXTENSION IF NOT EXISTS "pg_trgm";

-- CreateIndex
CREATE INDEX "products_title_trgm" ON "products" USING GIN ("title" gin_trgm_ops);

